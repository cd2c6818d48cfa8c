from .hooks import ConfigHashHook
from .loops import GraspEpochBasedTrainLoop

__all__ = ['ConfigHashHook', 'GraspEpochBasedTrainLoop']
