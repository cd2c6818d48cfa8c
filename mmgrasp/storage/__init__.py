"""The storage layer: what mmgrasp keeps on disk and how the model reads it — the label store
and the frame store (versioned derived assets), memory maps, the one-pass deferred reader, and
label stores published at a URL (planned range reads, a local block cache).

Its parts, each a folder, imported in this order (none imports a later one):

- :mod:`.remote`: stores published at a URL (sources, block cache, publishing, range reads);
- :mod:`.labels`: the label store, its per-view summaries and the memory maps of its files;
- :mod:`.frames`: the frame store (masked clouds) and the image store (whole RGB-D images);
- :mod:`.readers`: the readers the model calls (whole rows, matched cells, their common part);

and three modules all of them may use: :mod:`.source` (what a dataset reader provides),
:mod:`.derived_assets` (versioned builds next to the dataset) and :mod:`.secrets`.
Storage sits below datasets and models and imports neither.
"""
from .frames.images import ImageStore, ImageStoreError, open_image_store
from .frames.store import FrameStore, FrameStoreError, build_frame_store, open_frame_store
from .labels.store import (LabelStore, LabelStoreError, build_label_store, open_label_store,
                           open_remote_label_store)
from .readers import StoreGrids
from .remote.sources import RemoteFileChanged, RemoteNotFound, RemoteReadError, is_url
from .remote.store import (RemoteOptions, RemoteStore, RemoteStoreError, open_remote_store,
                           publish_store, read_url_rows)
from .source import DatasetFileError, GraspSource

__all__ = ['DatasetFileError', 'FrameStore', 'FrameStoreError', 'GraspSource', 'ImageStore',
           'ImageStoreError', 'LabelStore', 'LabelStoreError', 'RemoteFileChanged',
           'RemoteNotFound', 'RemoteOptions', 'RemoteReadError', 'RemoteStore',
           'RemoteStoreError', 'StoreGrids', 'build_frame_store', 'build_label_store', 'is_url',
           'open_frame_store', 'open_image_store', 'open_label_store', 'open_remote_label_store',
           'open_remote_store', 'publish_store', 'read_url_rows']
