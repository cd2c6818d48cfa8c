#!/usr/bin/env python
"""What a paper-size GSNet batch's label matching costs read from a published label store, in
one run.

    python tools/analysis/benchmark_remote_read.py [--latency-ms 20] [--bandwidth-mib 100]
        [--concurrency 64] [--block-kib 4] [--gaps-kib 0 64 256 1024] [--auto-gap-kib 4096]
        [--json OUT]

The store has the layout ``build_label_store`` writes (format 2: ``score_codes``,
``score_values``, ``widths``, ``tolerance``, ``scores``, ``self_collision``, per-object and
per-scene view summaries, scene ``collision``), for the real 300×12×4 grid: 4 scenes of 9
object instances each (36 objects of 1000–2000 label points, each kept at a quarter, at least
300, as the GSNet recipe keeps). Its files are sparse ``.npy``: only the bytes the batch reads
hold (random) data, the rest are holes, so the ~8 GB store takes tens of MiB of disk (each
row's block cache up to its fetched bytes, removed after the row). It is
published as ``publish_store`` lays it out (version folder, manifest with every file's
geometry, ``CURRENT``; written in place, since an upload would fill the holes) and served by
the in-process test range server (tests/servers/range_server.py) on 127.0.0.1, which delays every
answer by ``--latency-ms`` (a round trip) and caps the bandwidth of all connections together at
``--bandwidth-mib``.

The batch is what GSNet's assigner reads on the matched-cell path (batch 4, 1024 seeds a frame
matched to ~600 distinct label points, ``collision='zero_scores'``), through the real reader
(``gather_view_summaries`` then ``gather_view_cells`` of mmgrasp.structures.grasp_labels, the
calls the assigner makes, with its names): stage one the per-view ``view_count`` of every matched
row at its re-indexed views (300 B a row, scene files), stage two at each seed's chosen view the
48 one-byte μ codes, 48 float32 widths and the bytes of the scene-collision row that hold the
view's bits. Every result is checked bit for bit against the same gathers of the local store.

For every gap: bytes fetched against bytes used, range requests and sequential waves per batch,
and the two gathers' time with a cold block cache, then warm (the same batch again: no request).
Further rows: the read before stage reads were one wave (one wave per array, as four
``read_rows`` calls made it; the default gap), the gap each read chooses from the link hints,
one range request per row window (no cache, the same two waves and pool), and downloading the
touched files whole (one measured, scaled by bytes). Goal: a cold batch within 3 round trips
plus its used bytes at the cap. The Python server and client cost CPU per request, measured as
requests/s without latency or cap ("CPU floor"); the "link model" columns give what the same
waves, requests and bytes cost on the simulated link alone.
"""
import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'tests'))
from servers.range_server import RangeServer  # noqa: E402  (a test server, not the package's)

from mmgrasp.storage.readers import common as read_common
from mmgrasp.storage.remote import store as remote_store
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.store import (COLLISION_BITORDER, FORMAT_VERSION, packed_row_bytes,
                                         open_remote_label_store)
from mmgrasp.storage.remote.sources import ObjectSource, join_url
from mmgrasp.storage.remote.store import (CURRENT, MANIFEST, MIB, RemoteOptions, RemoteStore,
                                          describe_npy)
from mmgrasp.storage.labels.summaries import SUMMARY_DTYPES
from mmgrasp.structures.grasp_labels import (ObjectGraspLabels, gather_view_cells,
                                             gather_view_summaries)

GRID = (300, 12, 4)
FRAMES, OBJECTS_PER_FRAME, SEEDS, MATCHED_PER_FRAME, NUM_OBJECTS = 4, 9, 1024, 600, 88
MODE = 'zero_scores'
STAGE_ONE, STAGE_TWO = ['view_count'], ['scores', 'widths', 'collision']  # GSNet's assigner
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
    p.add_argument('--s3', action='store_true',
                   help='read from an S3 API server (moto, tests/servers/s3_server.py) instead: '
                        'one frame, --s3-points label points an object, only the files the '
                        'batch reads uploaded; HEAD and GET counted per cold batch')
    p.add_argument('--s3-points', type=int, nargs=2, default=[300, 400], metavar=('MIN', 'MAX'))
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ the store
def _sparse(path: str, shape: tuple, dtype) -> np.memmap:
    """A full-size .npy of holes (write the bytes to be read into it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return np.lib.format.open_memmap(path, mode='w+', dtype=dtype, shape=shape)


def plan_batch(rng: np.random.Generator, frames: int = FRAMES, points=(1000, 2000)) -> dict:
    """The batch: objects per frame, each object's kept rows, and every seed's (object
    instance, kept row, re-indexed views, chosen view)."""
    V = GRID[0]
    objects = [int(o) for o in rng.choice(NUM_OBJECTS, frames * OBJECTS_PER_FRAME,
                                          replace=False)]
    points = {o: int(rng.integers(points[0], points[1] + 1)) for o in objects}
    kept = {o: np.sort(rng.choice(points[o], max(points[o] // 4, 300), replace=False))
            for o in objects}
    owner, rows, views = [], [], []
    for frame in range(frames):
        instances = np.arange(frame * OBJECTS_PER_FRAME, (frame + 1) * OBJECTS_PER_FRAME)
        sizes = np.array([len(kept[objects[i]]) for i in instances])
        pair = rng.choice(sizes.sum(), MATCHED_PER_FRAME, replace=False)  # distinct rows
        pair = np.concatenate([pair, rng.choice(pair, SEEDS - MATCHED_PER_FRAME)])
        instance = np.searchsorted(np.cumsum(sizes), pair, side='right')
        owner.append(instances[instance])
        rows.append(pair - (np.cumsum(sizes) - sizes)[instance])
        poses = np.stack([rng.permutation(V) for _ in instances])  # views re-indexed by pose
        views.append(poses[instance])
    views = np.concatenate(views)
    chosen = views[np.arange(len(views)), rng.integers(0, V, len(views))]
    return dict(frames=frames, objects=objects, points=points, kept=kept,
                owner=np.concatenate(owner),
                rows=np.concatenate(rows), views=views, chosen=chosen)


def write_store(served: str, batch: dict, rng: np.random.Generator) -> str:
    """The published version folder: every file of the layout, data only where read."""
    version = os.path.join(served, VERSION)
    V, A, D = GRID
    packed = packed_row_bytes(GRID)
    objects, kept = batch['objects'], batch['kept']
    file_rows = np.array([kept[objects[i]][r] for i, r in zip(batch['owner'], batch['rows'])])
    manifest_objects, manifest_scenes = {}, {}
    for i, obj in enumerate(objects):
        folder, n = os.path.join(version, 'objects', f'{obj:03d}'), batch['points'][obj]
        os.makedirs(folder)
        np.save(os.path.join(folder, 'points.npy'), rng.random((n, 3), dtype=np.float32))
        table = np.unique(np.r_[0, rng.random(40)].astype(np.float32))
        np.save(os.path.join(folder, 'score_values.npy'), table)
        np.save(os.path.join(folder, 'tolerance_radii.npy'),
                np.sort(rng.random(12)).astype(np.float32))
        mine = batch['owner'] == i
        codes = _sparse(os.path.join(folder, 'score_codes.npy'), (n, V, A, D), np.uint8)
        codes[file_rows[mine], batch['chosen'][mine]] = rng.integers(
            0, len(table), (mine.sum(), A, D))
        widths = _sparse(os.path.join(folder, 'widths.npy'), (n, V, A, D), np.float32)
        widths[file_rows[mine], batch['chosen'][mine]] = rng.random((mine.sum(), A, D)) * 0.1
        for name, dtype in (('scores', np.float32), ('tolerance', np.uint8)):
            _sparse(os.path.join(folder, f'{name}.npy'), (n, V, A, D), dtype)
        _sparse(os.path.join(folder, 'self_collision.npy'), (n, packed), np.uint8)
        for name, dtype in SUMMARY_DTYPES.items():
            _sparse(os.path.join(folder, f'{name}.npy'), (n, V), dtype)
        del codes, widths
        manifest_objects[f'{obj:03d}'] = dict(num_points=n, has_tolerance=True,
                                              score_codes=True)
    offsets = {}
    for frame in range(batch['frames']):
        ids = objects[frame * OBJECTS_PER_FRAME:(frame + 1) * OBJECTS_PER_FRAME]
        counts = [batch['points'][o] for o in ids]
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        offsets.update({frame * OBJECTS_PER_FRAME + j: int(s) for j, s in enumerate(starts)})
        folder = os.path.join(version, 'scenes', f'{frame:04d}')
        here = (batch['owner'] // OBJECTS_PER_FRAME) == frame
        scene_rows = file_rows[here] + np.array([offsets[int(o)] for o in batch['owner'][here]])
        collision = _sparse(os.path.join(folder, 'collision.npy'), (sum(counts), packed),
                            np.uint8)
        collision[scene_rows] = rng.integers(0, 256, (here.sum(), packed))
        for name, dtype in SUMMARY_DTYPES.items():
            summary = _sparse(os.path.join(folder, f'{name}.npy'), (sum(counts), V), dtype)
            if name in STAGE_ONE:
                summary[scene_rows] = rng.integers(0, A * D + 1, (here.sum(), V))
            del summary
        del collision
        manifest_scenes[f'{frame:04d}'] = dict(object_ids=list(ids),
                                               row_offsets=[int(s) for s in starts])
    batch['offsets'] = offsets
    files = {}
    for d, _, names in os.walk(version):
        for name in names:
            path = os.path.join(d, name)
            files[os.path.relpath(path, version).replace(os.sep, '/')] = describe_npy(path)
    manifest = dict(format_version=FORMAT_VERSION, grid=list(GRID),
                    collision_bitorder=COLLISION_BITORDER, objects=manifest_objects,
                    scenes=manifest_scenes, sources={}, files=files, store_id=VERSION)
    with open(os.path.join(version, MANIFEST), 'w') as f:
        json.dump(manifest, f)
    with open(os.path.join(served, CURRENT), 'w') as f:
        f.write(f'{VERSION}\n')
    return version


# ------------------------------------------------------------------------------ the reads
def labels_of(store_path: str, batch: dict) -> list:
    """The batch's object instances as deferred labels of the store at ``store_path``."""
    labels = []
    for i, obj in enumerate(batch['objects']):
        rows = batch['kept'][obj].astype(np.int32)
        record = StoreGrids(store=store_path, object_id=obj, rows=rows, grid=GRID,
                            collision_mode=MODE, has_tolerance=True,
                            scene=i // OBJECTS_PER_FRAME, collision_offset=batch['offsets'][i],
                            matched_cells=True)
        labels.append(ObjectGraspLabels(points=torch.zeros(len(rows), 3), pose=torch.eye(4)[:3],
                                        object_id=obj, collision_mode=MODE, deferred=record))
    return labels


def read_batch(labels: list, batch: dict, store: Optional[RemoteStore] = None,
               calls: Optional[list] = None) -> dict:
    """Stage one then stage two, as GSNet's assigner reads them; ``calls`` gets the read
    statistics of each stage."""
    owner, rows = torch.from_numpy(batch['owner']), torch.from_numpy(batch['rows'])
    out = gather_view_summaries(labels, STAGE_ONE, owner, rows, torch.from_numpy(batch['views']))
    if calls is not None:
        calls.append(store.pop_stats())
    out.update(gather_view_cells(labels, STAGE_TWO, owner, rows,
                                 torch.from_numpy(batch['chosen'])))
    if calls is not None:
        calls.append(store.pop_stats())
    return out


@contextlib.contextmanager
def one_wave_per_array(store: RemoteStore, calls: list):
    """The read before stages were one wave: every array its own ``read_rows`` call (``calls``
    gets the statistics of each)."""
    def sequential(requests):
        for request in requests:
            read_common.read_rows(*request)
            calls.append(store.pop_stats())
    original = read_common.read_rows_many
    read_common.read_rows_many = sequential
    try:
        yield
    finally:
        read_common.read_rows_many = original


def same_bits(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        got[k].numpy().tobytes() == want[k].numpy().tobytes() for k in want)


def model_seconds(waves: list, latency: float, bandwidth: float, concurrency: int) -> float:
    """What the waves cost on a link of that latency and cap, with a client and server that
    cost no CPU: per wave, its rounds of ``concurrency`` requests overlapped with its bytes."""
    return sum(max(-(-requests // concurrency) * latency, latency + fetched / bandwidth)
               for requests, fetched in waves if requests)


# ------------------------------------------------------------------------------ baselines
def row_windows(version: str, batch: dict) -> List[list]:
    """The byte windows of every distinct row the two stages use, per stage: [(rel, start,
    stop, size)]."""
    V, A, D = GRID
    objects, kept = batch['objects'], batch['kept']
    file_rows = np.array([kept[objects[i]][r] for i, r in zip(batch['owner'], batch['rows'])])
    scene = batch['owner'] // OBJECTS_PER_FRAME
    scene_rows = file_rows + np.array([batch['offsets'][int(o)] for o in batch['owner']])
    with open(os.path.join(version, MANIFEST)) as f:
        files = json.load(f)['files']
    cells, packed = A * D, packed_row_bytes(GRID)

    def windows(rels, keys, row_bytes, first=None, last=None):
        out = set()
        for k, (rel, key) in enumerate(zip(rels, keys)):
            start = files[rel]['offset'] + (key * row_bytes if first is None else first[k])
            stop = start + row_bytes if last is None else files[rel]['offset'] + last[k]
            out.add((rel, int(start), int(stop), files[rel]['size']))
        return sorted(out)

    summary = windows([f'scenes/{s:04d}/view_count.npy' for s in scene], scene_rows, V)
    obj = [f'objects/{objects[i]:03d}' for i in batch['owner']]
    cell_keys = file_rows * V + batch['chosen']
    first_bit = scene_rows * packed * 8 + batch['chosen'] * cells
    stage_two = (windows([f'{o}/score_codes.npy' for o in obj], cell_keys, cells)
                 + windows([f'{o}/widths.npy' for o in obj], cell_keys, cells * 4)
                 + windows([f'scenes/{s:04d}/collision.npy' for s in scene], scene_rows, 0,
                           first_bit // 8, (first_bit + cells - 1) // 8 + 1))
    return [summary, stage_two]


def per_row(server: RangeServer, version: str, batch: dict, concurrency: int) -> dict:
    """One range request per row window, no cache, the same pool, stage one then stage two."""
    source, waves = ObjectSource(), []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for stage in row_windows(version, batch):
            list(pool.map(lambda w: source.read(join_url(server.url, VERSION, w[0]), w[1], w[2],
                                                w[3], None), stage))
            waves.append((len(stage), sum(w[2] - w[1] for w in stage)))
    return dict(label='one request per row window', requests=sum(w[0] for w in waves),
                fetched=sum(w[1] for w in waves), used=sum(w[1] for w in waves),
                waves=len(waves), cold_s=time.perf_counter() - t0, warm_s=None, wave_log=waves)


def whole_files(server: RangeServer, version: str, batch: dict, cache: str, args) -> dict:
    """The touched files downloaded whole: the largest measured (one range per 16 MiB, the
    pool), the batch's total scaled from its bytes."""
    touched = {w[0]: w[3] for stage in row_windows(version, batch) for w in stage}
    rel = max(touched, key=touched.get)
    with open(os.path.join(version, MANIFEST)) as f:
        manifest = json.load(f)
    store = RemoteStore(join_url(server.url, VERSION), manifest, cache,
                        RemoteOptions(concurrency=args.concurrency,
                                      block_size=args.block_kib << 10), ObjectSource())
    f = store._file(join_url(store.url, rel))
    blocks = np.arange(-(-f.size // store.options.block_size))
    t0 = time.perf_counter()
    for job in [store._pool_submit(store._fetch_blocks, f, first, stop)
                for first, stop in store._ranges(blocks, gap=f.size)]:
        job.result()
    one = time.perf_counter() - t0
    shutil.rmtree(cache, ignore_errors=True)
    total = sum(touched.values())
    return dict(label=f'whole files ({len(touched)}; 1 measured, scaled by bytes)',
                requests=None, fetched=total, used=None, waves=1, cold_s=one * total / f.size,
                warm_s=None, one_file_s=one, one_file_bytes=f.size, files=len(touched))


def requests_per_second(server: RangeServer, version: str, concurrency: int,
                        count: int = 2000) -> float:
    """Small range requests this machine's server and client complete per second (no
    latency, no cap): the CPU floor of a batch of many requests."""
    latency, bandwidth = server.state.latency, server.state.bandwidth
    server.state.latency, server.state.bandwidth = 0.0, None
    with open(os.path.join(version, MANIFEST)) as f:
        rel, entry = max(json.load(f)['files'].items(), key=lambda item: item[1]['size'])
    url, source = join_url(server.url, VERSION, rel), ObjectSource()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda i: source.read(url, i * 4096, i * 4096 + 192, entry['size'], None),
                      range(count)))
    server.state.latency, server.state.bandwidth = latency, bandwidth
    return count / (time.perf_counter() - t0)


# ------------------------------------------------------------------------------ the run
def run_config(server, cache: str, batch: dict, want: dict, label: str,
               options: dict, sequential: bool = False, url: Optional[str] = None) -> dict:
    remote_store._opened.clear()
    server.clear_log()
    store_path = open_remote_label_store(url or server.url, cache, options).path
    store = remote_store.opened_store_for(join_url(store_path, MANIFEST))
    labels = labels_of(store_path, batch)
    store.pop_stats()  # the mirror's fetches at open
    opened = len(server.requests())
    server.clear_log()
    calls = []
    with one_wave_per_array(store, calls) if sequential else contextlib.nullcontext():
        t0 = time.perf_counter()
        got = read_batch(labels, batch, store, calls)
        cold = time.perf_counter() - t0
        assert same_bits(got, want), f'{label}: bits differ from the local store'
        methods = {}
        for entry in server.requests('.npy'):
            methods[entry.method] = methods.get(entry.method, 0) + 1
        server.clear_log()
        t0 = time.perf_counter()
        again = read_batch(labels, batch)
        warm = time.perf_counter() - t0
    assert not server.requests() and same_bits(again, want), f'{label}: warm batch fetched'
    shutil.rmtree(cache, ignore_errors=True)
    return dict(label=label, requests=sum(s.requests for s in calls),
                fetched=sum(s.bytes_fetched for s in calls),
                used=sum(s.bytes_used for s in calls), waves=sum(s.waves for s in calls),
                cold_s=cold, warm_s=warm, methods=methods, open_requests=opened,
                wave_log=[(s.requests, s.bytes_fetched) for s in calls if s.waves])


def library_ranges(server, version: str, batch: dict, gap: int, concurrency: int) -> dict:
    """The batch's row windows read with ``obstore.get_ranges`` (its own coalescing at
    ``gap``, at most 10 requests in flight a call; one call per file, ``concurrency`` files at
    once, stage one then stage two): no block cache, no version check on the answers."""
    import obstore
    from obstore.store import from_url
    store = from_url(server.url('store'), client_options=dict(allow_http=True))
    server.clear_log()
    t0, fetched = time.perf_counter(), 0
    for stage in row_windows(version, batch):
        by_file = {}
        for rel, start, stop, _ in stage:
            by_file.setdefault(rel, ([], []))
            by_file[rel][0].append(start)
            by_file[rel][1].append(stop)
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda item: obstore.get_ranges(
                store, f'{VERSION}/{item[0]}', starts=item[1][0], ends=item[1][1],
                coalesce=gap), by_file.items()))
    cold = time.perf_counter() - t0
    methods = {}
    for entry in server.requests('.npy'):
        methods[entry.method] = methods.get(entry.method, 0) + 1
        first, last = (int(x) for x in entry.range.split('=')[1].split('-'))
        fetched += last + 1 - first
    return dict(label=f'obstore.get_ranges, coalesce {gap >> 10} KiB (no cache, no version '
                      f'check)', methods=methods, fetched=fetched, used=float('nan'), waves=2,
                cold_s=cold, open_requests=0)


def main_s3(args) -> None:
    """The cold and warm batch on moto's S3 server: requests by method, bytes, time."""
    from servers.s3_server import S3Server, environment, s3_environment
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix='mmgrasp-remote-s3-bench-')
    base = dict(block_size=args.block_kib << 10, concurrency=args.concurrency)
    try:
        batch = plan_batch(rng, frames=1, points=tuple(args.s3_points))
        version = write_store(os.path.join(work, 'built'), batch, rng)
        want = read_batch(labels_of(version, batch), batch)
        read = {'view_count.npy', 'score_codes.npy', 'score_values.npy', 'widths.npy',
                'collision.npy', 'points.npy', 'tolerance_radii.npy'}
        for folder, _, names in os.walk(version):
            for name in names:
                if name.endswith('.npy') and name not in read:
                    os.remove(os.path.join(folder, name))  # never read: not uploaded
        with S3Server() as server, environment(s3_environment(server)):
            t0 = time.perf_counter()
            remote_store.publish_store(version, server.url('store'))
            log(f'published to {server.url("store")} in {time.perf_counter() - t0:.1f} s')
            results = []
            for i, gap in enumerate(args.gaps_kib):
                label = f'gap {gap} KiB'
                r = run_config(server, os.path.join(work, f'cache-{i}'), batch, want, label,
                               dict(base, gap=gap << 10), url=server.url('store'))
                results.append(r)
                log(f'{label}: {r["methods"]} in {r["waves"]} waves, {r["fetched"] / MIB:.2f} MiB '
                    f'fetched for {r["used"] / MIB:.3f} MiB used, cold {r["cold_s"]:.2f} s, '
                    f'warm {r["warm_s"]:.3f} s; {r["open_requests"]} requests at open')
            for gap in args.gaps_kib:
                results.append(library_ranges(server, version, batch, gap << 10,
                                              args.concurrency))
                r = results[-1]
                log(f'{r["label"]}: {r["methods"]}, {r["fetched"] / MIB:.2f} MiB, '
                    f'cold {r["cold_s"]:.2f} s')
        distinct = len({(o, r) for o, r in zip(batch['owner'], batch['rows'])})
        lines = [f'S3 (moto on 127.0.0.1, no added latency): 1 frame × {OBJECTS_PER_FRAME} '
                 f'objects of {args.s3_points[0]}-{args.s3_points[1]} label points, '
                 f'{len(batch["owner"])} seeds on {distinct} distinct matched rows, grid {GRID}; '
                 f'{args.concurrency} in flight, {args.block_kib} KiB blocks', '',
                 '| read | GET | HEAD | other | waves | fetched (MiB) | used (MiB) | '
                 'cold batch (s) | warm batch (s) | requests at open |',
                 '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
        for r in results:
            r.setdefault('warm_s', float('nan'))
            m = dict(r['methods'])
            get, head = m.pop('GET', 0), m.pop('HEAD', 0)
            lines.append(f'| {r["label"]} | {get} | {head} | {sum(m.values())} | {r["waves"]} | '
                         f'{r["fetched"] / MIB:.2f} | {r["used"] / MIB:.3f} | {r["cold_s"]:.2f} | '
                         f'{r["warm_s"]:.3f} | {r["open_requests"]} |')
        print('\n'.join(lines))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(dict(results=results, args=vars(args)), f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.s3:
        return main_s3(args)
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix='mmgrasp-remote-bench-')
    latency, bandwidth = args.latency_ms / 1e3, args.bandwidth_mib * MIB
    base = dict(block_size=args.block_kib << 10, concurrency=args.concurrency)
    try:
        served = os.path.join(work, 'served')
        batch = plan_batch(rng)
        log(f'writing a sparse paper-size store to {served}')
        version = write_store(served, batch, rng)
        want = read_batch(labels_of(version, batch), batch)  # the local store's gathers
        configs = [(f'gap {gap} KiB', dict(base, gap=gap << 10), False) for gap in args.gaps_kib]
        default_gap = RemoteOptions().gap
        configs.append((f'gap {default_gap >> 10} KiB, one wave per array (before)',
                        dict(base, gap=default_gap), True))
        if args.auto_gap_kib:
            configs.append((f'gap chosen per read (≤ {args.auto_gap_kib} KiB, link hints)',
                            dict(base, gap=args.auto_gap_kib << 10, link_latency=latency,
                                 link_bandwidth=bandwidth), False))
        results: List[dict] = []
        with RangeServer(served, latency=latency, bandwidth=bandwidth) as server:
            for i, (label, options, sequential) in enumerate(configs):
                results.append(run_config(server, os.path.join(work, f'cache-{i}'), batch, want,
                                          label, options, sequential))
                r = results[-1]
                log(f'{label}: {r["requests"]} requests in {r["waves"]} waves '
                    f'{[w[0] for w in r["wave_log"]]}, '
                    f'{r["fetched"] / MIB:.1f} MiB, cold {r["cold_s"]:.2f} s, '
                    f'warm {r["warm_s"]:.3f} s')
            results.append(per_row(server, version, batch, args.concurrency))
            log(f'per row window: {results[-1]["requests"]} requests, '
                f'{results[-1]["cold_s"]:.2f} s')
            results.append(whole_files(server, version, batch, os.path.join(work, 'whole'),
                                       args))
            log(f'whole file: {results[-1]["one_file_s"]:.2f} s for '
                f'{results[-1]["one_file_bytes"] / MIB:.0f} MiB')
            rate = requests_per_second(server, version, args.concurrency)
            log(f'{rate:.0f} requests/s without latency or cap')
        for r in results:
            if 'wave_log' in r:  # kept in the JSON: (requests, bytes fetched) of each wave
                waves = r['wave_log']
                r['model_s'] = model_seconds(waves, latency, bandwidth, args.concurrency)
                r['model_wide_s'] = model_seconds(waves, latency, bandwidth, WIDE)
            else:
                r['model_s'] = r['model_wide_s'] = latency + r['fetched'] / bandwidth
        used = results[0]['used']
        goal = 3 * latency + used / bandwidth
        with open(os.path.join(version, MANIFEST)) as f:
            files = json.load(f)['files']
        batch['store_bytes'], batch['store_files'] = sum(e['size'] for e in files.values()), \
            len(files)
        print(report(results, args, batch, used, goal, rate))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(dict(results=results, used=used, goal_s=goal, args=vars(args),
                               requests_per_s=rate), f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(results: List[dict], args, batch: dict, used: int, goal: float, rate: float) -> str:
    distinct = len({(o, r) for o, r in zip(batch['owner'], batch['rows'])})
    lines = [f'{batch["frames"]} frames × {OBJECTS_PER_FRAME} objects, '
             f'{len(batch["owner"])} seeds on {distinct} distinct matched rows, grid {GRID}, '
             f'store of {batch["store_files"]} '
             f'files, {batch["store_bytes"] / 1e9:.1f} GB; GSNet reads (stage one '
             f'{STAGE_ONE}, stage two {STAGE_TWO}): {used / 1e3:.0f} kB used per batch; '
             f'latency {args.latency_ms:g} ms per request, {args.bandwidth_mib:g} MiB/s cap, '
             f'{args.concurrency} requests in flight, {args.block_kib} KiB blocks. Goal: cold '
             f'≤ 3 × latency + used bytes at the cap = {goal * 1e3:.0f} ms. This machine\'s '
             f'server and client complete {rate:.0f} small requests/s (no latency, no cap): '
             f'"CPU floor" '
             f'= requests / that rate. "Link model" = per wave, max(rounds of '
             f'{args.concurrency} requests × latency, latency + bytes / cap).', '',
             '| read | requests | waves | fetched (MiB) | fetched / used | cold batch (s) | '
             'cold / goal | CPU floor (s) | link model (s) | model / goal | '
             f'model, {WIDE} in flight / goal | warm batch (s) |',
             '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in results:
        warm = f'{r["warm_s"]:.3f}' if r['warm_s'] is not None else '—'
        requests = r['requests'] if r['requests'] is not None else '—'
        floor = f'{r["requests"] / rate:.2f}' if r['requests'] is not None else '—'
        lines.append(f'| {r["label"]} | {requests} | {r["waves"]} | {r["fetched"] / MIB:.2f} | '
                     f'{r["fetched"] / used:.1f} | {r["cold_s"]:.2f} | {r["cold_s"] / goal:.1f} | '
                     f'{floor} | {r["model_s"]:.3f} | {r["model_s"] / goal:.2f} | '
                     f'{r["model_wide_s"] / goal:.2f} | {warm} |')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
