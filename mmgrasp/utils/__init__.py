from .checkpoint_compat import allow_mmengine_checkpoints
from .setup_env import register_all_modules

__all__ = ['allow_mmengine_checkpoints', 'register_all_modules']
