"""A small published store served over HTTP on 127.0.0.1 (a thread of the test process)."""
import json
import os

import numpy as np
import pytest

from mmgrasp.storage import publish_store
from mmgrasp.storage.remote import store as remote_store
from servers.range_server import RangeServer


def write_version(folder: str, seed: int = 0) -> str:
    """A store version with files of awkward row sizes (rows straddle cache blocks)."""
    rng = np.random.default_rng(seed)
    version = os.path.join(folder, 'store-0123abcd')
    for obj, n in ((0, 90), (1, 61)):
        sub = os.path.join(version, 'objects', f'{obj:03d}')
        os.makedirs(sub)
        np.save(os.path.join(sub, 'scores.npy'), rng.random((n, 7, 3, 4), dtype=np.float32))
        np.save(os.path.join(sub, 'points.npy'), rng.random((n, 3), dtype=np.float32))
        np.save(os.path.join(sub, 'tolerance_radii.npy'), rng.random(5, dtype=np.float32))
    sub = os.path.join(version, 'scenes', '0000')
    os.makedirs(sub)
    np.save(os.path.join(sub, 'collision.npy'), rng.integers(0, 256, (151, 11), dtype=np.uint8))
    with open(os.path.join(version, 'manifest.json'), 'w') as f:
        json.dump(dict(format_version=1, grid=[7, 3, 4], objects={}, scenes={}), f)
    return version


@pytest.fixture
def version_dir(tmp_path):
    return write_version(str(tmp_path / 'built'))


@pytest.fixture
def served(tmp_path, version_dir):
    """(server, published folder on disk, version folder); the server stops after the test."""
    folder = tmp_path / 'published'
    publish_store(version_dir, f'file://{folder}')
    with RangeServer(str(folder)) as server:
        yield server, str(folder), version_dir


@pytest.fixture(autouse=True)
def _fresh_registry():
    """Each test opens its stores anew (as a new process would)."""
    remote_store._opened.clear()
    yield
    remote_store._opened.clear()
