from .hooks import ConfigHashHook
from .loops import GraspEpochBasedTrainLoop
from .optimizers import CPUAmpOptimWrapper
from .prefetcher import DevicePrefetcher

__all__ = ['ConfigHashHook', 'CPUAmpOptimWrapper', 'DevicePrefetcher', 'GraspEpochBasedTrainLoop']
