"""Faults of a real server on 127.0.0.1 — the HTTP range server and S3 (moto) — each injected,
then the recovery or the error (naming URL and byte range) checked, the read's end bounded by
the timeout and retry budget, and the cache checked to hold nothing wrong afterwards.

The bound is checked on what the servers saw, not on the wall clock (a loaded machine stretches
any time): a failing range is tried exactly 1 + retries times, and a stalled request is still
unanswered when the read has failed, so the client's timeout (or the killed connection), not
the server's late answer, ended it."""
import os
import threading

import numpy as np
import pytest

from _remote_helpers import SCORES, cached_blocks_are_true, expected, logged_blocks, read
from mmgrasp.storage import RemoteFileChanged, RemoteReadError, open_remote_store
from mmgrasp.storage.remote import store as remote_store
from mmgrasp.storage.remote.sources import join_url

# a timeout a loaded machine's local server meets; every stall injected lasts far longer
FAST = dict(backoff=0.01, retries=2, block_size=256, gap=0, timeout=2.0)
RANGE = r'objects/000/scores.npy bytes \d+-\d+: '


def open_fast(published, tmp_path, **options):
    return open_remote_store(published.url, str(tmp_path / 'cache'), dict(FAST, **options))


def no_blocks_of(store, rel):
    return logged_blocks(store, store._file(join_url(store.url, rel)).key) == []


def unanswered(server, match: str) -> bool:
    """Every GET for ``match`` the server logged is still without an answer (a stalled one
    gets its status only when the server answers; a reset one is logged with 0)."""
    entries = [e for e in server.requests(match) if e.method == 'GET']
    return bool(entries) and all(e.status in (0, None) for e in entries)


def built(published):
    """The published files as built (what an unchanged server serves, also once it is dead)."""
    return os.path.dirname(published.version_dir)


@pytest.mark.parametrize('kind,extra', [('reset', {}), ('status', dict(status=503)),
                                        ('status', dict(status=500)), ('short', {}),
                                        ('stall', dict(seconds=30.0))])
def test_a_passing_fault_is_retried(published_by_server, tmp_path, kind, extra):
    server = published_by_server.server
    store = open_fast(published_by_server, tmp_path)
    fault = server.inject(kind, 'objects/000/scores', count=1, **extra)
    keys = [4, 30, 31]
    assert np.array_equal(read(store, SCORES, keys),
                          expected(published_by_server.version_dir, SCORES, keys))
    assert fault.count == 0  # the fault was met, and the library's retry read the range
    assert cached_blocks_are_true(store, built(published_by_server)) > 0


@pytest.mark.slow
@pytest.mark.parametrize('kind,extra', [('reset', {}), ('status', dict(status=503)),
                                        ('short', {}), ('stall', dict(seconds=60.0))])
def test_a_lasting_fault_ends_within_the_bound_naming_url_and_range(published_by_server,
                                                                    tmp_path, kind, extra):
    server = published_by_server.server
    store = open_fast(published_by_server, tmp_path)
    read(store, 'objects/001/scores.npy', [1])  # something good in the cache
    fault = server.inject(kind, 'objects/000/scores', count=1000, **extra)
    with pytest.raises(RemoteReadError, match=RANGE + r'.*\[timeout 2 s, 2 retries\]'):
        read(store, SCORES, [7])
    assert 1000 - fault.count == 1 + FAST['retries']  # retried by the library, then given up
    if kind == 'stall':  # each attempt ended by the client's timeout, not the 60 s stall
        assert unanswered(server, '000/scores')
    assert no_blocks_of(store, SCORES)
    assert cached_blocks_are_true(store, built(published_by_server)) > 0


@pytest.mark.slow
def test_a_hung_server_ends_the_read_and_cancels_the_queue(published_by_server, tmp_path):
    """Every request accepted, none answered: the read ends within one request's bound, and the
    ranges still queued behind the pool are never sent."""
    server = published_by_server.server
    store = open_fast(published_by_server, tmp_path, concurrency=2)
    server.inject('stall', 'objects/000/scores', count=1000, seconds=60.0)
    server.clear_log()
    with pytest.raises(RemoteReadError, match=RANGE):
        read(store, SCORES, list(range(0, 90, 3)))  # 30 ranges, 2 in flight
    assert unanswered(server, '000/scores')  # ended by the client's timeout
    store._pool.shutdown(wait=True)  # settled: every range the pool ran has ended
    # the servers log a request when it arrives (a stalled one too), so this counts every
    # request sent: the 2 ranges in flight, each tried 1 + retries times, and none queued
    assert len(server.requests('000/scores')) <= 2 * (1 + FAST['retries'])
    assert no_blocks_of(store, SCORES)


def test_a_server_killed_mid_read_ends_it_within_the_bound(published_by_server, tmp_path):
    """The server dies while requests wait on it: the read ends with the killed connections,
    not with the client's timeout (30 s here, so that only the kill can end it early) nor the
    server's answer (never sent: the requests stall for 60 s)."""
    server = published_by_server.server
    store = open_fast(published_by_server, tmp_path, concurrency=4, timeout=30.0)
    read(store, 'objects/001/scores.npy', [1])
    server.inject('stall', 'objects/000/scores', count=1000, seconds=60.0)  # requests in flight
    killed = threading.Event()

    def kill_once_requests_wait():  # an event, not a delay: the requests have reached it
        while not [e for e in server.requests('000/scores') if e.method == 'GET']:
            threading.Event().wait(0.01)
        server.kill()
        killed.set()
    killer = threading.Thread(target=kill_once_requests_wait, daemon=True)
    killer.start()
    with pytest.raises(RemoteReadError, match=RANGE) as error:
        read(store, SCORES, list(range(0, 90, 3)))
    killer.join()
    assert killed.is_set() and unanswered(server, '000/scores')
    assert 'timed out' not in str(error.value).lower(), str(error.value)
    assert no_blocks_of(store, SCORES)
    assert cached_blocks_are_true(store, built(published_by_server)) > 0


def test_a_file_replaced_between_runs_is_caught_by_the_recorded_version(published_by_server,
                                                                        tmp_path):
    published = published_by_server
    store = open_fast(published, tmp_path)
    read(store, SCORES, [0])  # its blocks and version tag stay on disk
    data = published.truth(SCORES)
    published.replace(SCORES, data[:-1] + bytes([data[-1] ^ 0xFF]))
    remote_store._opened.clear()
    again = open_fast(published, tmp_path)
    assert again._file(join_url(again.url, SCORES)).tag is not None
    with pytest.raises(RemoteFileChanged, match=RANGE + r'the file was replaced on the server'):
        read(again, SCORES, [60])
    assert no_blocks_of(again, SCORES) and cached_blocks_are_true(again, published) == 0
    # a new run after that reads the new version, from the server, not the old blocks
    remote_store._opened.clear()
    if published.scheme == 's3':  # the manifest names the old version: the store is refused
        with pytest.raises(RemoteFileChanged):
            read(open_fast(published, tmp_path), SCORES, [0])
        return
    third = open_fast(published, tmp_path)
    new = np.frombuffer(published.truth(SCORES)[-336:], np.float32).reshape(7, 3, 4)
    assert np.array_equal(read(third, SCORES, [89])[0], new)


def test_a_file_of_another_size_contradicts_the_manifest(published_by_server, tmp_path):
    published = published_by_server
    store = open_fast(published, tmp_path)
    published.replace(SCORES, published.truth(SCORES) + b'\0' * 336)
    with pytest.raises(RemoteFileChanged, match=RANGE + r'the file (has \d+ bytes on the '
                                                        r'server, the store manifest says \d+'
                                                        r'|was replaced)'):
        read(store, SCORES, [3])
    assert no_blocks_of(store, SCORES)


@pytest.mark.parametrize('retries', [0, 2])
def test_retries_is_the_number_of_further_attempts(published_by_server, tmp_path, retries):
    """The library's retries are the only ones: a lasting 503 is asked 1 + retries times."""
    server = published_by_server.server
    store = open_fast(published_by_server, tmp_path, retries=retries)
    fault = server.inject('status', 'objects/000/scores', count=1000, status=503)
    with pytest.raises(RemoteReadError, match=RANGE + rf'.*\[timeout 2 s, {retries} retries\]'):
        read(store, SCORES, [7])
    assert 1000 - fault.count == 1 + retries
