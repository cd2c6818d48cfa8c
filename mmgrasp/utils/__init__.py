from .checkpoint_compat import allow_mmengine_checkpoints
from .cli import (add_launcher_args, apply_cli_options, apply_launcher, init_cpu_distributed,
                  leave_distributed)
from .setup_env import register_all_modules

__all__ = ['add_launcher_args', 'allow_mmengine_checkpoints', 'apply_cli_options',
           'apply_launcher', 'init_cpu_distributed', 'leave_distributed', 'register_all_modules']
