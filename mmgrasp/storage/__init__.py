"""The storage layer: where label bytes live and how they are read (local maps, remote URLs).

Nothing here imports from :mod:`mmgrasp.datasets` or :mod:`mmgrasp.models`.
"""
from .remote_source import RemoteFileChanged, RemoteReadError, is_url
from .remote_store import (RemoteOptions, RemoteStore, RemoteStoreError, open_remote_store,
                           publish_store, read_url_rows)

__all__ = ['RemoteFileChanged', 'RemoteOptions', 'RemoteReadError', 'RemoteStore',
           'RemoteStoreError', 'is_url', 'open_remote_store', 'publish_store', 'read_url_rows']
