#!/usr/bin/env python
"""What a paper-size GSNet batch costs read from a label store on remote storage, in one run.

    python tools/analysis/benchmark_remote_read.py [--latency-ms 20] [--bandwidth-mib 100]
        [--concurrency 64] [--block-kib 64] [--gaps-kib 0 64 256 1024] [--json OUT]

A store of the real 300×12×4 grid is written to a temporary folder: 4 frames of 4 scenes,
9 object instances each (36 object files, 1000–2000 label points), as sparse ``.npy`` files so
that only the rows the batch reads occupy disk. It is served by the in-process range server
(mmgrasp.storage.range_server) on 127.0.0.1, which delays every answer by ``--latency-ms`` (a
round trip) and caps the bandwidth of all connections together at ``--bandwidth-mib``.

The batch is the deferred read a GSNet batch makes today: 600 matched label points per frame
(2400 distinct rows, spread over each frame's objects like the assigner's matches), read as
three ``read_rows`` calls — whole score rows (57.6 kB), their scene-collision rows (1.8 kB) and
the widths of one view each (48 cells). For every gap it reports the bytes fetched against the
bytes used, the requests, and the batch read time with a cold block cache, then warm (the same
batch again: no request). Baselines: one range request per row (no cache, same concurrency),
and downloading the files whole (measured for one file, extrapolated to the batch's files).
The goal: a cold batch within 3 round trips plus its bytes at the bandwidth cap.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

import numpy as np

from mmgrasp.storage.range_server import RangeServer
from mmgrasp.storage.remote_source import HTTPSource, join_url
from mmgrasp.storage.remote_store import MIB, RemoteOptions, RemoteStore, describe_npy

GRID = (300, 12, 4)
FRAMES, OBJECTS_PER_FRAME, MATCHED_PER_FRAME, NUM_OBJECTS = 4, 9, 600, 88
VERSION = 'store-benchmark'
WIDE = 512  # requests in flight of the second link model (an object store takes that many)


def log(message: str) -> None:
    print(f'[benchmark] {message}', file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--latency-ms', type=float, default=20.0, help='delay of every answer')
    p.add_argument('--bandwidth-mib', type=float, default=100.0, help='MiB/s, all connections')
    p.add_argument('--concurrency', type=int, default=64, help='range requests in flight')
    p.add_argument('--block-kib', type=int, default=4, help='block cache block size')
    p.add_argument('--gaps-kib', type=int, nargs='+', default=[0, 64, 256, 1024])
    p.add_argument('--auto-gap-kib', type=int, default=4096,
                   help='also run with the link hints (latency, cap): each read picks its gap '
                        'up to this (0: skip)')
    p.add_argument('--json', help='also write the results to this JSON file')
    return p.parse_args(argv)


def write_store(folder: str, rng: np.random.Generator) -> Dict[str, list]:
    """Sparse store files and the batch's three reads: {call: [(rel, keys, row_shape, dtype)]}."""
    version = os.path.join(folder, VERSION)
    cells = int(np.prod(GRID))
    packed = (cells + 7) // 8
    objects = rng.choice(NUM_OBJECTS, FRAMES * OBJECTS_PER_FRAME, replace=False)
    points = {int(o): int(rng.integers(1000, 2001)) for o in objects}
    reads = {'scores': {}, 'collision': {}, 'widths': {}}
    for frame in range(FRAMES):
        frame_objects = [int(o) for o in objects[frame * 9:(frame + 1) * 9]]
        counts = np.array([points[o] for o in frame_objects])
        kept = np.maximum(counts // 4, 300)
        matched = rng.multinomial(MATCHED_PER_FRAME, kept / kept.sum())
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        scene_rel = f'scenes/{frame:04d}/collision.npy'
        for obj, n, m, offset in zip(frame_objects, counts, matched, offsets):
            rows = np.sort(rng.choice(n, m, replace=False))
            views = rng.integers(0, GRID[0], m)
            reads['scores'][f'objects/{obj:03d}/scores.npy'] = rows
            reads['widths'][f'objects/{obj:03d}/widths.npy'] = np.sort(rows * GRID[0] + views)
            reads['collision'].setdefault(scene_rel, []).append(rows + offset)
        reads['collision'][scene_rel] = np.sort(np.concatenate(reads['collision'][scene_rel]))
        _sparse(os.path.join(version, scene_rel), (int(counts.sum()), packed), np.uint8,
                reads['collision'][scene_rel], rng)
    for obj, n in points.items():
        for name in ('scores', 'widths'):
            rel = f'objects/{obj:03d}/{name}.npy'
            keys = reads[name][rel] // (GRID[0] if name == 'widths' else 1)
            _sparse(os.path.join(version, rel), (n, *GRID), np.float32, keys, rng)
    files = {}
    for d, _, names in os.walk(version):
        for name in names:
            path = os.path.join(d, name)
            files[os.path.relpath(path, version)] = describe_npy(path)
    with open(os.path.join(version, 'manifest.json'), 'w') as f:
        json.dump(dict(format_version=1, grid=list(GRID), files=files, store_id=VERSION), f)
    shapes = {'scores': (GRID, np.float32), 'widths': (GRID[1:], np.float32),
              'collision': ((packed,), np.uint8)}
    return {call: [(rel, keys, *shapes[call]) for rel, keys in sorted(per_file.items())]
            for call, per_file in reads.items()}


def _sparse(path: str, shape: tuple, dtype, rows: np.ndarray, rng) -> None:
    """A full-size .npy whose only written rows are ``rows`` (the rest are holes)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    array = np.lib.format.open_memmap(path, mode='w+', dtype=dtype, shape=shape)
    for row in np.unique(rows):
        array[row] = rng.integers(0, 255, array[row].shape).astype(dtype)
    array.flush()
    del array


def read_batch(store: RemoteStore, reads: Dict[str, list], calls: Optional[list] = None
               ) -> Dict[str, np.ndarray]:
    """The batch's three read_rows calls, one after the other (as the gathers make them);
    ``calls`` gets each call's (requests, bytes fetched)."""
    out = {}
    for call, files in reads.items():
        paths = [join_url(store.url, rel) for rel, *_ in files]
        file_ids = np.concatenate([np.full(len(k), i) for i, (_, k, _, _) in enumerate(files)])
        keys = np.concatenate([k for _, k, _, _ in files])
        row_shape, dtype = files[0][2], files[0][3]
        out[call] = np.empty((len(keys), *row_shape), dtype)
        store.read_rows(paths, file_ids, keys, row_shape, out[call])
        if calls is not None:
            stats = store.pop_stats()
            calls.append((stats.requests, stats.bytes_fetched))
    return out


def model_seconds(calls: list, latency: float, bandwidth: float, concurrency: int) -> float:
    """What the calls cost on a link of that latency and cap, with a client and server that
    cost no CPU: per call, its waves of ``concurrency`` requests overlapped with its bytes."""
    return sum(max(-(-requests // concurrency) * latency, latency + fetched / bandwidth)
               for requests, fetched in calls if requests)


def requests_per_second(server: RangeServer, folder: str, concurrency: int,
                        count: int = 2000) -> float:
    """Small range requests this machine's server and client complete per second (no
    latency, no cap): the CPU floor of a batch of many requests."""
    latency, bandwidth = server.state.latency, server.state.bandwidth
    server.state.latency, server.state.bandwidth = 0.0, None
    manifest = json.load(open(os.path.join(folder, VERSION, 'manifest.json')))
    rel, entry = next(iter(sorted(manifest['files'].items())))
    url, source = join_url(server.url, VERSION, rel), HTTPSource()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda i: source.read(url, i * 192, i * 192 + 192, entry['size'], None),
                      range(count)))
    server.state.latency, server.state.bandwidth = latency, bandwidth
    return count / (time.perf_counter() - t0)


def truth(folder: str, reads: Dict[str, list]) -> Dict[str, np.ndarray]:
    result = {}
    for call, files in reads.items():
        parts = []
        for rel, keys, row_shape, _ in files:
            array = np.load(os.path.join(folder, VERSION, rel), mmap_mode='r')
            parts.append(np.asarray(array.reshape(-1, *row_shape)[keys]))
        result[call] = np.concatenate(parts)
    return result


def used_bytes(reads: Dict[str, list]) -> int:
    return sum(len(k) * int(np.prod(shape)) * np.dtype(dt).itemsize
               for files in reads.values() for _, k, shape, dt in files)


def per_row(server: RangeServer, folder: str, reads: Dict[str, list], concurrency: int) -> dict:
    """One range request per row, no cache, the same pool width."""
    source = HTTPSource()
    manifest = json.load(open(os.path.join(folder, VERSION, 'manifest.json')))
    jobs = []
    for call, files in reads.items():
        for rel, keys, shape, dtype in files:
            entry = manifest['files'][rel]
            row_bytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            url = join_url(server.url, VERSION, rel)
            for key in keys.tolist():
                start = entry['offset'] + key * row_bytes
                jobs.append((call, url, start, start + row_bytes, entry['size']))
    t0, calls = time.perf_counter(), []
    with ThreadPoolExecutor(concurrency) as pool:
        for call in reads:  # the three calls one after the other, as in read_batch
            mine = [j for j in jobs if j[0] == call]
            list(pool.map(lambda j: source.read(j[1], j[2], j[3], j[4], None), mine))
            calls.append((len(mine), sum(j[3] - j[2] for j in mine)))
    seconds = time.perf_counter() - t0
    fetched = sum(j[3] - j[2] for j in jobs)
    return dict(label='one request per row', requests=len(jobs), fetched=fetched,
                cold_s=seconds, warm_s=None, calls=calls)


def whole_files(server: RangeServer, folder: str, reads: Dict[str, list], cache: str,
                args) -> dict:
    """Whole files: one file downloaded (a cold cache, read-ahead of the whole file, one range
    per 16 MiB), the batch's total extrapolated from its bytes."""
    rel = reads['scores'][0][0]
    store = RemoteStore(join_url(server.url, VERSION),
                        json.load(open(os.path.join(folder, VERSION, 'manifest.json'))),
                        cache, RemoteOptions(concurrency=args.concurrency,
                                             block_size=args.block_kib << 10), HTTPSource())
    f = store._file(join_url(store.url, rel))
    t0 = time.perf_counter()
    jobs = [store._pool_submit(store._fetch_blocks, f, first, stop)
            for first, stop in store._ranges(np.arange(-(-f.size // store.options.block_size)),
                                             gap=f.size)]
    for job in jobs:
        job.result()
    one = time.perf_counter() - t0
    total = sum(os.path.getsize(os.path.join(folder, VERSION, r))
                for files in reads.values() for r, *_ in files)
    shutil.rmtree(cache, ignore_errors=True)
    return dict(label='whole files (1 measured, scaled by bytes)', requests=None,
                fetched=total, cold_s=one * total / f.size, warm_s=None, one_file_s=one,
                one_file_bytes=f.size)


def main(argv=None) -> None:
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix='mmgrasp-remote-bench-')
    try:
        served = os.path.join(work, 'served')
        log(f'writing a sparse paper-size store to {served}')
        reads = write_store(served, rng)
        expected = truth(served, reads)
        used = used_bytes(reads)
        rows = sum(len(k) for _, k, _, _ in reads['scores'])
        results: List[dict] = []
        latency, bandwidth = args.latency_ms / 1e3, args.bandwidth_mib * MIB
        with RangeServer(served, latency=latency, bandwidth=bandwidth) as server:
            manifest = json.load(open(os.path.join(served, VERSION, 'manifest.json')))
            configs = [(f'gap {gap} KiB', gap, {}) for gap in args.gaps_kib]
            if args.auto_gap_kib:
                configs.append((f'gap chosen per read (≤ {args.auto_gap_kib} KiB, link hints)',
                                args.auto_gap_kib,
                                dict(link_latency=latency, link_bandwidth=bandwidth)))
            for label, gap, hints in configs:
                cache = os.path.join(work, f'cache-{gap}-{len(hints)}')
                options = RemoteOptions(gap=gap << 10, block_size=args.block_kib << 10,
                                        concurrency=args.concurrency, **hints)
                store = RemoteStore(join_url(server.url, VERSION), manifest, cache, options,
                                    HTTPSource())
                calls = []
                t0 = time.perf_counter()
                got = read_batch(store, reads, calls)
                cold = time.perf_counter() - t0
                assert all(np.array_equal(got[c], expected[c]) for c in reads), 'wrong bytes'
                server.clear_log()
                t0 = time.perf_counter()
                read_batch(store, reads)
                warm = time.perf_counter() - t0
                assert not server.requests(), 'a warm batch made requests'
                requests, fetched = (sum(c[i] for c in calls) for i in (0, 1))
                results.append(dict(label=label, requests=requests, fetched=fetched,
                                    cold_s=cold, warm_s=warm, calls=calls,
                                    model_s=model_seconds(calls, latency, bandwidth,
                                                          args.concurrency),
                                    model_wide_s=model_seconds(calls, latency, bandwidth, WIDE)))
                log(f'{label}: {requests} requests, {fetched / MIB:.1f} MiB, '
                    f'cold {cold:.2f} s, warm {warm:.3f} s')
                shutil.rmtree(cache, ignore_errors=True)
            results.append(per_row(server, served, reads, args.concurrency))
            calls = results[-1].pop('calls')
            results[-1]['model_s'] = model_seconds(calls, latency, bandwidth, args.concurrency)
            results[-1]['model_wide_s'] = model_seconds(calls, latency, bandwidth, WIDE)
            log(f'per row: {results[-1]["cold_s"]:.2f} s')
            results.append(whole_files(server, served, reads, os.path.join(work, 'whole'), args))
            log(f'whole file: {results[-1]["one_file_s"]:.2f} s for '
                f'{results[-1]["one_file_bytes"] / MIB:.0f} MiB')
            results[-1]['model_s'] = results[-1]['model_wide_s'] = \
                latency + results[-1]['fetched'] / bandwidth
            rate = requests_per_second(server, served, args.concurrency)
            log(f'{rate:.0f} requests/s without latency or cap')
        goal = 3 * latency + used / bandwidth
        print(report(results, args, used, rows, goal, rate))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(dict(results=results, used=used, goal_s=goal, args=vars(args),
                               requests_per_s=rate), f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(results: List[dict], args, used: int, rows: int, goal: float, rate: float) -> str:
    lines = [f'{FRAMES} frames × {OBJECTS_PER_FRAME} objects, {rows} matched rows, grid {GRID}: '
             f'{used / MIB:.1f} MiB used per batch (score rows, collision rows, widths at one '
             f'view); latency {args.latency_ms:g} ms per request, {args.bandwidth_mib:g} MiB/s '
             f'cap, {args.concurrency} requests in flight, {args.block_kib} KiB blocks. '
             f'Goal: cold ≤ 3 × latency + used bytes at the cap = {goal:.2f} s. This machine\'s '
             f'server and client complete {rate:.0f} small requests/s (no latency, no cap): '
             f'"CPU floor" = requests / that rate. "Link model" = per read_rows call, '
             f'max(waves of {args.concurrency} requests × latency, latency + bytes / cap).', '',
             '| read | requests | fetched (MiB) | fetched / used | cold batch (s) | '
             'cold / goal | CPU floor (s) | link model (s) | model / goal | '
             f'model, {WIDE} in flight / goal | warm batch (s) |',
             '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in results:
        warm = f'{r["warm_s"]:.3f}' if r['warm_s'] is not None else '—'
        requests = r['requests'] if r['requests'] is not None else '—'
        floor = f'{r["requests"] / rate:.2f}' if r['requests'] is not None else '—'
        lines.append(f'| {r["label"]} | {requests} | {r["fetched"] / MIB:.1f} | '
                     f'{r["fetched"] / used:.2f} | {r["cold_s"]:.2f} | {r["cold_s"] / goal:.2f} | '
                     f'{floor} | {r["model_s"]:.2f} | {r["model_s"] / goal:.2f} | '
                     f'{r["model_wide_s"] / goal:.2f} | {warm} |')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
