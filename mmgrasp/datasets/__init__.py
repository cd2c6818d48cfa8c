from .graspnet_dataset import GraspNetDataset
from .graspnet_reader import DatasetFileError, GraspNetReader
from .samplers import EpochAwareSampler

__all__ = ['DatasetFileError', 'EpochAwareSampler', 'GraspNetDataset', 'GraspNetReader']
