"""The top layer: inference on depth images, and what the tools (train, test, browse, convert)
and tests call to build mmgrasp's modules: the registration of every module, the launcher and
command-line options, the config check."""
from .cli import (SETTING_ERRORS, add_launcher_args, apply_cli_options, apply_launcher,
                  check_data_roots, config_num_threads, init_cpu_distributed, leave_distributed,
                  pinned_threads)
from .grasp_inferencer import GraspInferencer, check_intrinsics, read_depth
from .setup_env import register_all_modules

__all__ = ['GraspInferencer', 'SETTING_ERRORS', 'add_launcher_args', 'apply_cli_options',
           'apply_launcher', 'check_data_roots', 'check_intrinsics', 'config_num_threads',
           'init_cpu_distributed', 'leave_distributed', 'pinned_threads', 'read_depth',
           'register_all_modules']
