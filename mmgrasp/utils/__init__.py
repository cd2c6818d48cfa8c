from .checkpoint_compat import allow_mmengine_checkpoints
from .cli import apply_cli_options
from .setup_env import register_all_modules

__all__ = ['allow_mmengine_checkpoints', 'apply_cli_options', 'register_all_modules']
