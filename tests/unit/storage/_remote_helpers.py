"""Reading helpers shared by the remote store tests."""
import os
import subprocess
import sys

import numpy as np

from mmgrasp.storage import open_remote_store
from mmgrasp.storage.remote.sources import join_url

SCORES = 'objects/000/scores.npy'


def read(store, rel, keys, row_shape=(7, 3, 4), dtype=np.float32):
    keys = np.asarray(keys, dtype=np.int64)
    out = np.full((len(keys), *row_shape), 99, dtype)
    store.read_rows([join_url(store.url, rel)], np.zeros(len(keys), np.int64), keys, row_shape,
                    out)
    return out


def expected(version_dir, rel, keys, row_shape=(7, 3, 4)):
    return np.load(os.path.join(version_dir, rel)).reshape(-1, *row_shape)[keys]


def logged_blocks(store, key):
    """Block indices the cache's log lists for a file key (what it would serve once checked)."""
    path = os.path.join(store.cache.folder, key + '.log')
    if not os.path.exists(path):
        return []
    raw = np.fromfile(path, np.uint32)
    return sorted(set(raw[:len(raw) // 2 * 2].reshape(-1, 2)[:, 0].tolist()))


def cached_blocks_are_true(store, served):
    """Every block the cache lists equals the bytes of the file now served at that offset
    (``served``: the published folder, or a conftest ``Published``); returns how many there
    are."""
    folder, bs = store.cache.folder, store.options.block_size
    checked = 0
    for name in os.listdir(folder):
        if not name.endswith('.source'):
            continue
        key = name[:-len('.source')]
        if not logged_blocks(store, key):
            continue  # a mirrored small file: its version is noted, its bytes are not cached
        with open(os.path.join(folder, name)) as f:
            url = f.read().split('\n')[0]
        rel = url[len(store.url) + 1:]
        if isinstance(served, str):
            with open(os.path.join(served, store.url.rsplit('/', 1)[1], rel), 'rb') as f:
                truth = f.read()
        else:
            truth = served.truth(rel)
        with open(os.path.join(folder, key + '.data'), 'rb') as f:
            data = f.read()
        for index in logged_blocks(store, key):
            assert data[index * bs:(index + 1) * bs] == truth[index * bs:(index + 1) * bs], \
                (rel, index)
            checked += 1
    return checked


def open_http(served, tmp_path, **options):
    server, _, _ = served
    return open_remote_store(server.url, str(tmp_path / 'cache'), options)


def dead_pid() -> int:
    """The id of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, '-c', 'pass'])
    child.wait()
    return child.pid
