from .hooks import ConfigHashHook
from .loops import GraspEpochBasedTrainLoop
from .prefetcher import DevicePrefetcher

__all__ = ['ConfigHashHook', 'DevicePrefetcher', 'GraspEpochBasedTrainLoop']
