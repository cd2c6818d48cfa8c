from .part_timer import PartTimer

__all__ = ['PartTimer']
