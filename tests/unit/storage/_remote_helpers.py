"""Reading helpers shared by the remote store tests."""
import os

import numpy as np

from mmgrasp.storage import open_remote_store
from mmgrasp.storage.remote_source import join_url

SCORES = 'objects/000/scores.npy'


def read(store, rel, keys, row_shape=(7, 3, 4), dtype=np.float32):
    keys = np.asarray(keys, dtype=np.int64)
    out = np.full((len(keys), *row_shape), 99, dtype)
    store.read_rows([join_url(store.url, rel)], np.zeros(len(keys), np.int64), keys, row_shape,
                    out)
    return out


def expected(version_dir, rel, keys, row_shape=(7, 3, 4)):
    return np.load(os.path.join(version_dir, rel)).reshape(-1, *row_shape)[keys]


def cached_blocks_are_true(store, served_folder):
    """Every block in the cache equals the bytes of the file now served at that offset."""
    blocks = store.cache.folder
    bs = store.options.block_size
    checked = 0
    for key in os.listdir(blocks):
        with open(os.path.join(blocks, key, 'source')) as f:
            url = f.read().split('\n')[0]
        rel = url[len(store.url) + 1:]
        with open(os.path.join(served_folder, store.url.rsplit('/', 1)[1], rel), 'rb') as f:
            truth = f.read()
        for name in os.listdir(os.path.join(blocks, key)):
            if name.isdigit():
                with open(os.path.join(blocks, key, name), 'rb') as f:
                    assert f.read() == truth[int(name) * bs:(int(name) + 1) * bs], (rel, name)
                checked += 1
    return checked


def open_http(served, tmp_path, **options):
    server, _, _ = served
    return open_remote_store(server.url, str(tmp_path / 'cache'), options)
