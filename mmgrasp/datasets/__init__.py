from .deferred_reader import StoreGrids
from .frame_store import FrameStore, FrameStoreError, build_frame_store, open_frame_store
from .graspnet_dataset import GraspNetDataset
from .graspnet_reader import DatasetFileError, GraspNetReader
from .label_store import LabelStore, LabelStoreError, build_label_store, open_label_store
from .samplers import EpochAwareSampler

__all__ = ['DatasetFileError', 'EpochAwareSampler', 'FrameStore', 'FrameStoreError',
           'GraspNetDataset', 'GraspNetReader', 'LabelStore', 'LabelStoreError', 'StoreGrids',
           'build_frame_store', 'build_label_store', 'open_frame_store', 'open_label_store']
