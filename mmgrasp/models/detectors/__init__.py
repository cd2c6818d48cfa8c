from .gsnet import GSNet

__all__ = ['GSNet']
