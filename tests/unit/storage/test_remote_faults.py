"""Faults of a real HTTP range server on 127.0.0.1: each injected, then the recovery or the error
(naming URL and byte range) checked, and the cache checked to hold nothing wrong afterwards."""
import os

import numpy as np
import pytest

from _remote_helpers import (SCORES, cached_blocks_are_true, expected, logged_blocks, open_http,
                             read)
from mmgrasp.storage import RemoteFileChanged, RemoteReadError
from mmgrasp.storage.remote import store as remote_store
from mmgrasp.storage.remote.sources import join_url

FAST = dict(backoff=0.01, retries=2, block_size=256, gap=0)
RANGE = r'objects/000/scores.npy bytes \d+-\d+: '


def no_blocks_of(store, rel):
    return logged_blocks(store, store._file(join_url(store.url, rel)).key) == []


@pytest.mark.parametrize('kind,extra', [('reset', {}), ('status', dict(status=503)),
                                        ('status', dict(status=500)), ('short', {}),
                                        ('stall', dict(seconds=1.0))])
def test_a_passing_fault_is_retried(served, tmp_path, kind, extra):
    server, folder, version_dir = served
    store = open_http(served, tmp_path, timeout=0.3, **FAST)
    server.inject(kind, 'scores', count=1, **extra)
    keys = [4, 30, 31]
    assert np.array_equal(read(store, SCORES, keys), expected(version_dir, SCORES, keys))
    assert store.pop_stats().retries == 1
    assert cached_blocks_are_true(store, folder) > 0


@pytest.mark.parametrize('kind,extra,reason', [
    ('reset', {}, 'connection failed'), ('status', dict(status=503), 'HTTP 503'),
    ('short', {}, 'short read'), ('stall', dict(seconds=1.0), r'no answer within 0.3 s')])
def test_a_lasting_fault_ends_in_an_error_naming_url_and_range(served, tmp_path, kind, extra,
                                                               reason):
    server, folder, _ = served
    store = open_http(served, tmp_path, timeout=0.3, **FAST)
    read(store, 'objects/001/scores.npy', [1])  # something good in the cache
    fault = server.inject(kind, 'objects/000/scores', count=100, **extra)
    with pytest.raises(RemoteReadError, match=RANGE + reason + r'.*gave up after 3 attempts'):
        read(store, SCORES, [7])
    assert fault.count == 100 - 3  # the request and two retries met the fault
    assert no_blocks_of(store, SCORES)
    assert cached_blocks_are_true(store, folder) > 0


def test_an_http_error_that_cannot_pass_is_not_retried(served, tmp_path):
    server, folder, version_dir = served
    store = open_http(served, tmp_path, **FAST)
    os.remove(os.path.join(folder, os.path.basename(version_dir), SCORES))
    with pytest.raises(RemoteReadError, match=RANGE + r'not found \(HTTP 404\)$'):
        read(store, SCORES, [7])
    assert len(server.requests('objects/000/scores')) == 1 and no_blocks_of(store, SCORES)


def _replace(folder, version_dir, rel, grow=0):
    path = os.path.join(folder, os.path.basename(version_dir), rel)
    data = bytearray(open(path, 'rb').read()) + b'\0' * grow
    data[-1] ^= 0xFF  # the last row differs
    with open(path + '.new', 'wb') as f:
        f.write(data)
    os.replace(path + '.new', path)
    return path


def test_a_file_replaced_mid_run_is_never_mixed(served, tmp_path):
    server, folder, version_dir = served
    store = open_http(served, tmp_path, **FAST)
    read(store, SCORES, [0])
    _replace(folder, version_dir, SCORES)
    with pytest.raises(RemoteFileChanged, match=RANGE + 'the file was replaced on the server'):
        read(store, SCORES, [50])
    assert no_blocks_of(store, SCORES)
    assert cached_blocks_are_true(store, folder) == 0
    # a new run reads the new version whole, from the server, not the old blocks
    remote_store._opened.clear()
    again = open_http(served, tmp_path, **FAST)
    path = os.path.join(folder, os.path.basename(version_dir), SCORES)
    assert np.array_equal(read(again, SCORES, [0, 89]), np.load(path)[[0, 89]])
    assert cached_blocks_are_true(again, folder) > 0


def test_a_file_replaced_between_runs_is_caught_by_the_recorded_version(served, tmp_path):
    server, folder, version_dir = served
    store = open_http(served, tmp_path, **FAST)
    read(store, SCORES, [0])  # its blocks and version tag stay on disk
    _replace(folder, version_dir, SCORES)
    remote_store._opened.clear()
    again = open_http(served, tmp_path, **FAST)
    assert again.cache.version_tag(again._file(join_url(again.url, SCORES)).key) is not None
    with pytest.raises(RemoteFileChanged, match=RANGE + r'.*HTTP 412'):
        read(again, SCORES, [60])
    assert no_blocks_of(again, SCORES) and cached_blocks_are_true(again, folder) == 0


def test_a_file_of_another_size_contradicts_the_manifest(served, tmp_path):
    server, folder, version_dir = served
    store = open_http(served, tmp_path, **FAST)
    _replace(folder, version_dir, SCORES, grow=336)
    with pytest.raises(RemoteFileChanged, match=RANGE + r'the file has \d+ bytes on the server, '
                                                        r'the store manifest says \d+'):
        read(store, SCORES, [3])
    assert no_blocks_of(store, SCORES)
