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


class Published:
    """A published store read at ``url`` over one scheme, with the means to change what is
    served: ``truth`` (the bytes served now), ``replace``, ``remove``; ``server`` is the test
    server in front (None for file://), ``requests`` its log of GETs and HEADs."""

    def __init__(self, scheme: str, url: str, version_dir: str, server=None, folder=None):
        self.scheme, self.url, self.version_dir, self.server = scheme, url, version_dir, server
        self._folder = folder  # the published folder on disk (file://, http://)
        self.version = os.path.basename(version_dir)

    def _key(self, rel: str) -> str:
        return f'{self.url.split("/", 3)[3]}/{self.version}/{rel}'

    def truth(self, rel: str) -> bytes:
        if self.scheme == 's3':
            return self.server.client().get_object(Bucket=self.server.bucket,
                                                   Key=self._key(rel))['Body'].read()
        with open(os.path.join(self._folder, self.version, rel), 'rb') as f:
            return f.read()

    def replace(self, rel: str, data: bytes) -> None:
        if self.scheme == 's3':
            self.server.client().put_object(Bucket=self.server.bucket, Key=self._key(rel),
                                            Body=data)
            return
        path = os.path.join(self._folder, self.version, rel)
        with open(path + '.new', 'wb') as f:
            f.write(data)
        os.replace(path + '.new', path)

    def remove(self, rel: str) -> None:
        if self.scheme == 's3':
            self.server.client().delete_object(Bucket=self.server.bucket, Key=self._key(rel))
        else:
            os.remove(os.path.join(self._folder, self.version, rel))

    def requests(self, match: str = ''):
        return self.server.requests(match) if self.server is not None else []


def publish_over(scheme: str, tmp_path, version_dir: str, request) -> Published:
    """``version_dir`` published and served over ``scheme`` (file, http or s3)."""
    if scheme == 's3':
        server = request.getfixturevalue('s3_server')
        publish_store(version_dir, server.url('published'))
        return Published('s3', server.url('published'), version_dir, server)
    folder = str(tmp_path / 'published')
    publish_store(version_dir, f'file://{folder}')
    if scheme == 'file':
        return Published('file', f'file://{folder}', version_dir, folder=folder)
    server = RangeServer(folder).__enter__()
    request.addfinalizer(lambda: server.__exit__(None, None, None))
    return Published('http', server.url, version_dir, server, folder)


@pytest.fixture(params=['file', 'http', 's3'])
def published(request, tmp_path, version_dir) -> Published:
    """The small store published over each scheme in turn."""
    return publish_over(request.param, tmp_path, version_dir, request)


@pytest.fixture(params=['http', 's3'])
def published_by_server(request, tmp_path, version_dir) -> Published:
    """The small store behind each test server in turn (faults can be injected)."""
    return publish_over(request.param, tmp_path, version_dir, request)
