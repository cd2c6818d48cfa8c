from .deferred_reader import StoreGrids
from .graspnet_dataset import GraspNetDataset
from .graspnet_reader import DatasetFileError, GraspNetReader
from .label_store import LabelStore, LabelStoreError, build_label_store, open_label_store
from .samplers import EpochAwareSampler

__all__ = ['DatasetFileError', 'EpochAwareSampler', 'GraspNetDataset', 'GraspNetReader',
           'LabelStore', 'LabelStoreError', 'StoreGrids', 'build_label_store',
           'open_label_store']
