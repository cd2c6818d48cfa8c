from .checkpoint_compat import allow_mmengine_checkpoints

__all__ = ['allow_mmengine_checkpoints']
