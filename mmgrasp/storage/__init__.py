"""The label store, the frame store and the deferred reader: what mmgrasp keeps on disk and how
the model reads it. Storage sits below datasets and models and imports neither."""
from .deferred_reader import StoreGrids
from .frame_store import FrameStore, FrameStoreError, build_frame_store, open_frame_store
from .label_store import LabelStore, LabelStoreError, build_label_store, open_label_store
from .source import DatasetFileError, GraspSource

__all__ = ['DatasetFileError', 'FrameStore', 'FrameStoreError', 'GraspSource', 'LabelStore',
           'LabelStoreError', 'StoreGrids', 'build_frame_store', 'build_label_store',
           'open_frame_store', 'open_label_store']
