from .hooks import ConfigHashHook
from .loops import GraspEpochBasedTrainLoop
from .optimizers import CPUAmpOptimWrapper
from .prefetcher import DevicePrefetcher
from .schedulers import WarmupCosineLR

__all__ = ['ConfigHashHook', 'CPUAmpOptimWrapper', 'DevicePrefetcher', 'GraspEpochBasedTrainLoop',
           'WarmupCosineLR']
