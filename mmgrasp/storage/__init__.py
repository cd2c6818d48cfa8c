"""The storage layer: what mmgrasp keeps on disk and how the model reads it — the label store
and the frame store (versioned derived assets), memory maps, the one-pass deferred reader, and
label stores published at a URL (planned range reads, a local block cache).

Storage sits below datasets and models and imports neither.
"""
from .deferred_reader import StoreGrids
from .frame_store import FrameStore, FrameStoreError, build_frame_store, open_frame_store
from .label_store import (LabelStore, LabelStoreError, build_label_store, open_label_store,
                          open_remote_label_store)
from .remote_source import RemoteFileChanged, RemoteReadError, is_url
from .remote_store import (RemoteOptions, RemoteStore, RemoteStoreError, open_remote_store,
                           publish_store, read_url_rows)
from .source import DatasetFileError, GraspSource

__all__ = ['DatasetFileError', 'FrameStore', 'FrameStoreError', 'GraspSource', 'LabelStore',
           'LabelStoreError', 'RemoteFileChanged', 'RemoteOptions', 'RemoteReadError',
           'RemoteStore', 'RemoteStoreError', 'StoreGrids', 'build_frame_store',
           'build_label_store', 'is_url', 'open_frame_store', 'open_label_store',
           'open_remote_label_store', 'open_remote_store', 'publish_store', 'read_url_rows']
