"""The remote store reader: exact rows, coalescing, the block cache, options — over HTTP (the
other schemes: test_remote_schemes.py)."""
import multiprocessing
import os
import socket

import numpy as np
import pytest

from mmgrasp.storage import RemoteStoreError, open_remote_store, publish_store
from mmgrasp.storage.remote import store as remote_store
from mmgrasp.storage.remote.sources import join_url

from _remote_helpers import (SCORES, cached_blocks_are_true, dead_pid, expected, logged_blocks,
                             open_http, read)


@pytest.mark.parametrize('block_size,gap', [(64, 0), (256, 1024), (1000, 0), (1 << 16, 1 << 16)])
def test_rows_equal_the_files_for_any_block_size_and_gap(served, tmp_path, block_size, gap):
    store = open_http(served, tmp_path, block_size=block_size, gap=gap)
    keys = [0, 3, 4, 17, 50, 89]
    assert np.array_equal(read(store, SCORES, keys), expected(served[2], SCORES, keys))
    cells = [5, 6, 80, 7 * 89 + 6]  # one view's (A, D) block: row * V + view
    assert np.array_equal(read(store, SCORES, cells, (3, 4)),
                          expected(served[2], SCORES, cells, (3, 4)))
    rows = [0, 1, 150]
    got = read(store, 'scenes/0000/collision.npy', rows, (11,), np.uint8)
    assert np.array_equal(got, expected(served[2], 'scenes/0000/collision.npy', rows, (11,)))
    assert cached_blocks_are_true(store, served[1]) > 0


def test_several_files_in_one_read(served, tmp_path):
    store = open_http(served, tmp_path, block_size=128)
    paths = [join_url(store.url, SCORES), join_url(store.url, 'objects/001/scores.npy')]
    file_ids, keys = np.array([0, 0, 1, 1, 1]), np.array([2, 70, 0, 33, 60])
    out = np.empty((5, 7, 3, 4), np.float32)
    store.read_rows(paths, file_ids, keys, (7, 3, 4), out)
    truth = np.concatenate([expected(served[2], SCORES, [2, 70]),
                            expected(served[2], 'objects/001/scores.npy', [0, 33, 60])])
    assert np.array_equal(out, truth)


def test_several_reads_in_one_wave(served, tmp_path):
    """read_rows_many: reads of other files, row shapes and dtypes — and two of one file —
    planned together, all their range requests in flight at once, rows as the files hold."""
    server = served[0]
    store = open_http(served, tmp_path, block_size=256, gap=0)
    url = lambda rel: join_url(store.url, rel)  # noqa: E731
    other, collision = 'objects/001/scores.npy', 'scenes/0000/collision.npy'
    reads = [([url(SCORES), url(other)], [0, 0, 1], [3, 60, 7], (7, 3, 4), np.float32),
             ([url(collision)], [0, 0], [2, 150], (11,), np.uint8),
             ([url(SCORES)], [0, 0], [5 * 7 + 2, 89 * 7 + 6], (3, 4), np.float32)]
    requests = [(paths, np.array(ids), np.array(keys), shape, np.full((len(keys), *shape), 99,
                                                                      dtype))
                for paths, ids, keys, shape, dtype in reads]
    server.state.latency = 0.5
    server.clear_log()
    store.pop_stats()  # the mirror's fetches at open
    store.read_rows_many(requests)
    stats = store.pop_stats()
    logged = server.requests('.npy')
    # 4 ranges of SCORES (blocks 4-5 and 79-80 of two rows, 7 and 118 of two cells), 1 of the
    # other file, 2 of the collision rows
    assert stats.read_calls == stats.waves == 1 and stats.requests == len(logged) == 7
    assert server.state.max_in_flight == len(logged)  # no request waited for another
    for (paths, ids, keys, shape, _), (*_, out) in zip(reads, requests):
        rels = [p[len(store.url) + 1:] for p in paths]
        want = np.concatenate([expected(served[2], rels[i], [k], shape) for i, k in zip(ids, keys)])
        assert np.array_equal(out, want)
    assert cached_blocks_are_true(store, served[1]) > 0
    server.clear_log()
    for request in requests:  # warm: no wave at all
        store.read_rows(*request)
    assert server.requests() == [] and store.pop_stats().waves == 0


def test_a_row_past_the_file_names_it(served, tmp_path):
    store = open_http(served, tmp_path)
    with pytest.raises(IndexError, match=r'objects/000/scores.npy: row 90 requested'):
        read(store, SCORES, [90])


def test_rows_of_another_dtype_or_shape_are_refused(served, tmp_path):
    store = open_http(served, tmp_path)
    with pytest.raises(ValueError, match=r'scores.npy: a <f4 array of shape \[90, 7, 3, 4\] '
                                         r'cannot be read as rows of \(7, 3, 4\) \|u1'):
        read(store, SCORES, [1], dtype=np.uint8)
    with pytest.raises(ValueError, match='cannot be read as rows of \\(11,\\)'):
        read(store, SCORES, [1], row_shape=(11,))


def test_gap_merges_requests_and_costs_bytes(served, tmp_path):
    server = served[0]
    keys = list(range(0, 90, 10))
    counts = {}
    for gap in (0, 1 << 20):
        store = open_remote_store(server.url, str(tmp_path / f'cache-{gap}'),
                                  dict(gap=gap, block_size=512))
        server.clear_log()
        read(store, SCORES, keys)
        stats = store.pop_stats()
        counts[gap] = (len(server.requests('scores')), stats.bytes_fetched, stats.bytes_used)
    assert counts[0][0] == len(keys) and counts[1 << 20][0] == 1
    assert counts[0][1] < counts[1 << 20][1]
    assert counts[0][2] == counts[1 << 20][2] == len(keys) * 7 * 3 * 4 * 4


def test_link_hints_choose_the_gap_of_each_read(served, tmp_path):
    server = served[0]
    keys = list(range(0, 90, 10))
    counts = {}
    for name, latency, bandwidth in (('slow requests', 1.0, 1e12), ('slow bytes', 1e-6, 1e3),
                                     ('no hints', None, None)):
        store = open_remote_store(server.url, str(tmp_path / name), dict(
            gap=1 << 20, block_size=512, link_latency=latency, link_bandwidth=bandwidth,
            concurrency=1))
        server.clear_log()
        assert np.array_equal(read(store, SCORES, keys), expected(served[2], SCORES, keys))
        counts[name] = len(server.requests('scores'))
    # one request in flight: a costly round trip merges everything within the gap, costly
    # bytes merge nothing
    assert counts['slow requests'] == counts['no hints'] == 1
    assert counts['slow bytes'] == len(keys)
    capped = open_remote_store(server.url, str(tmp_path / 'capped'), dict(
        gap=1024, block_size=512, link_latency=1.0, link_bandwidth=1e12, concurrency=1))
    server.clear_log()
    read(capped, SCORES, keys)  # rows 3360 bytes apart: more than the gap allows
    assert len(server.requests('scores')) == len(keys)


def test_max_request_bytes_splits_ranges(served, tmp_path):
    store = open_http(served, tmp_path, gap=1 << 20, block_size=512, max_request_bytes=2048)
    served[0].clear_log()
    read(store, SCORES, list(range(90)))
    sizes = [r.range[1] - r.range[0] for r in served[0].requests('scores')]
    assert max(sizes) <= 2048 and len(sizes) == -(-(90 * 336 + 128) // 2048)


def test_warm_cache_needs_no_request_and_survives_a_restart(served, tmp_path):
    server = served[0]
    store = open_http(served, tmp_path, block_size=256)
    keys = [1, 2, 40]
    first = read(store, SCORES, keys)
    server.clear_log()
    assert np.array_equal(read(store, SCORES, keys), first)
    assert server.requests('scores') == []
    remote_store._opened.clear()  # a new run
    again = open_http(served, tmp_path, block_size=256)
    assert again is not store
    assert np.array_equal(read(again, SCORES, keys), first)
    assert server.requests('scores') == [] and again.pop_stats().blocks_from_cache > 0


def test_budget_evicts_least_recently_used_files(served, tmp_path):
    server = served[0]
    store = open_http(served, tmp_path, block_size=256, cache_bytes=6000, gap=0)
    other = 'objects/001/scores.npy'
    read(store, SCORES, [0, 20, 40, 60])  # ~1.5 KiB each: two such reads fit, not three
    read(store, other, [0, 20, 40, 60])
    assert store.cache.used <= 6000
    read(store, other, [1, 2, 21, 22, 41, 42, 52, 60])  # SCORES is the least recently used
    assert store.cache.used <= 6000
    key = store._file(join_url(store.url, SCORES)).key
    assert logged_blocks(store, key) == []
    server.clear_log()
    read(store, other, [0, 20])
    assert server.requests() == []  # the recent file stayed
    read(store, SCORES, [0])
    assert len(server.requests('000/scores')) == 1  # evicted, fetched again
    assert cached_blocks_are_true(store, served[1]) > 0


def test_cache_budget_option_limits_disk(served, tmp_path):
    small = open_remote_store(served[0].url, str(tmp_path / 'a'), dict(cache_bytes=2000,
                                                                      block_size=256))
    large = open_remote_store(served[0].url, str(tmp_path / 'b'), dict(block_size=256))
    for store in (small, large):
        read(store, SCORES, list(range(0, 90, 3)))
    assert small.cache.used <= 2000 < large.cache.used


def test_crash_leftovers_and_torn_blocks_are_never_served(served, tmp_path):
    store = open_http(served, tmp_path, block_size=256)
    truth = read(store, SCORES, [5, 6])
    key = store._file(join_url(store.url, SCORES)).key
    folder = store.cache.folder
    first = logged_blocks(store, key)[0]
    with open(os.path.join(folder, key + '.data'), 'r+b') as f:  # bytes torn by a power loss
        f.seek(first * 256 + 10)
        f.write(b'\xff\xfe')
    with open(os.path.join(folder, key + '.log'), 'ab') as f:  # half a log record
        f.write(b'\x01\x00')
    with open(os.path.join(folder, f'{key}.data.tmp-{socket.gethostname()}-{dead_pid()}-4'),
              'wb') as f:
        f.write(b'x' * 256)
    remote_store._opened.clear()
    served[0].clear_log()
    again = open_http(served, tmp_path, block_size=256)
    assert not any('.tmp-' in n for n in os.listdir(folder))
    assert np.array_equal(read(again, SCORES, [5, 6]), truth)
    assert len(served[0].requests('000/scores')) == 1  # the torn block, fetched again
    assert cached_blocks_are_true(again, served[1]) > 0


def test_concurrency_bounds_requests_in_flight(served, tmp_path):
    server = served[0]
    server.state.latency = 0.05
    server.state.linger = 0.05  # an answered request is not in flight, however late its thread
    seen = {}
    for concurrency in (2, 8):
        store = open_remote_store(server.url, str(tmp_path / f'c{concurrency}'),
                                  dict(concurrency=concurrency, gap=0, block_size=256))
        server.clear_log()
        read(store, SCORES, list(range(0, 90, 6)))
        seen[concurrency] = server.state.max_in_flight
    assert seen[2] <= 2 < seen[8] <= 8


def test_read_ahead_fetches_whole_files_within_the_budget(served, tmp_path):
    server = served[0]
    store = open_http(served, tmp_path, read_ahead=True, block_size=256)
    read(store, SCORES, [3])
    store.wait_read_ahead()
    server.clear_log()
    assert np.array_equal(read(store, SCORES, list(range(90))),
                          expected(served[2], SCORES, list(range(90))))
    assert server.requests('scores') == []
    tight = open_remote_store(server.url, str(tmp_path / 'tight'),
                              dict(read_ahead=True, block_size=256, cache_bytes=20000))
    read(tight, SCORES, [3])  # 30 KiB file, 10 KiB half budget: no read-ahead
    tight.wait_read_ahead()
    server.clear_log()
    read(tight, SCORES, [80])
    assert len(server.requests('scores')) == 1


def _read_in_child(store, queue):
    try:
        read(store, SCORES, [1])
        queue.put('read')
    except RemoteStoreError as exc:
        queue.put(str(exc))


def test_a_forked_worker_never_fetches(served, tmp_path):
    store = open_http(served, tmp_path)
    context = multiprocessing.get_context('fork')
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(store, queue))
    child.start()
    message = queue.get(timeout=60)
    child.join()
    assert 'never touches the network' in message
    assert os.path.isfile(store.local_copy(join_url(store.url, 'objects/000/points.npy')))


def test_small_files_mirrored_at_open(served, tmp_path):
    store = open_http(served, tmp_path)
    for rel in ('objects/000/points.npy', 'objects/001/tolerance_radii.npy'):
        assert np.array_equal(np.load(store.local_copy(join_url(store.url, rel))),
                              np.load(os.path.join(served[2], rel)))
    with pytest.raises(RemoteStoreError, match='no local copy'):
        store.local_copy(join_url(store.url, SCORES))


def test_half_uploaded_store_is_refused(served, tmp_path):
    server, folder, version_dir = served
    os.remove(os.path.join(folder, os.path.basename(version_dir), 'manifest.json'))
    with pytest.raises(RemoteStoreError, match='upload has not finished'):
        open_http(served, tmp_path)


def test_publish_writes_files_then_manifest_then_current(version_dir, tmp_path, monkeypatch):
    from mmgrasp.storage.remote.sources import ObjectSource
    order = []
    monkeypatch.setattr(ObjectSource, 'write',
                        lambda self, url, data: order.append(url) or f'"tag-{len(order)}"')
    publish_store(version_dir, f'file://{tmp_path}/pub')
    assert order[-2].endswith('store-0123abcd/manifest.json') and order[-1].endswith('/CURRENT')
    assert len(order) == 2 + 7


def test_unknown_option_is_refused(served, tmp_path):
    with pytest.raises(ValueError, match=r"\['gaps'\] unknown"):
        open_http(served, tmp_path, gaps=0)
