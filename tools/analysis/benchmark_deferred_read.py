#!/usr/bin/env python
"""Measure the deferred label read against this machine's memcpy, and what a deferred sample costs.

The deferred design only pays off if (1) reading matched rows inside the model runs close to
memcpy bandwidth and (2) a deferred object leaving a loader worker is tiny whatever the grid.
This measures both on the real 300×12×4 grid:

* the read: ``--rows`` distinct label points spread over the objects (page cache warm, random
  request order), copied once each, in file order, from the memory maps into the reused
  buffer — the pass a gather makes over the maps, and all the host does before the one
  transfer on CUDA — best of ``--repeats``, against ``np.copyto`` of an equally large float32
  array into a preallocated destination; target read/memcpy >= 0.8.
* for information, the whole ``gather_grids(objects, 'scores', owner, rows)`` on the CPU: it
  adds the expansion of the rows to the requests into newly allocated memory (on CUDA that
  step runs on the device), and ``'zero_scores'`` (collision bits applied).
* ``pickle.dumps(protocol=5)`` of one ObjectGraspLabels holding a StoreGrids record for ~500
  kept label points, against the same labels with dense scores and widths; target < 64 KiB.
  Plain pickle counts every payload byte; a DataLoader worker's ForkingPickler instead moves
  tensor storages to shared memory (the same bytes, copied once) and pickles only a handle.

Usage:
    python tools/analysis/benchmark_deferred_read.py [--root DIR] [--rows 2500] [--repeats 5]
        [--json OUT]

Without ``--root`` a synthetic dataset (2 objects of ~1400 points, ~1 GB) and its label store
are written to a temporary folder and removed afterwards.
"""
import argparse
import contextlib
import dataclasses
import json
import os
import pickle
import sys
import tempfile
import time
from typing import Callable, List, Optional

import numpy as np
import torch

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.storage.deferred_reader import StoreGrids, distinct_in_file_order, read_rows
from mmgrasp.storage.label_store import LabelStore, open_label_store
from mmgrasp.structures.grasp_labels import ObjectGraspLabels, gather_grids

MIB = 1 << 20
DEFERRED_TARGET = 64 * 1024
RATIO_TARGET = 0.8
KEPT_ROWS = 500  # a quarter of a typical 2000-point object


def log(msg: str) -> None:
    print(f'[benchmark] {msg}', file=sys.stderr, flush=True)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--root', help='GraspNet-layout dataset root (default: a temporary synthetic '
                                  'one with the real 300x12x4 grid)')
    p.add_argument('--rows', type=int, default=2500, help='distinct label points read per gather')
    p.add_argument('--repeats', type=int, default=5, help='timings per measure; the best is kept')
    p.add_argument('--json', help='also write the results to this JSON file')
    return p.parse_args(argv)


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float('inf')
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def scene_objects(store: LabelStore, mode: str) -> List[ObjectGraspLabels]:
    """Every object instance of the store's first scene, all label points kept, deferred."""
    scene = min(store.scenes)
    objects = []
    for instance, obj in enumerate(store.scenes[scene].object_ids):
        n = store.objects[obj].num_points
        record = StoreGrids(store=store.path, object_id=obj, rows=np.arange(n, dtype=np.int32),
                            grid=store.grid, collision_mode=mode, has_tolerance=False,
                            scene=scene,
                            collision_offset=store.collision_row_offset(scene, instance))
        objects.append(ObjectGraspLabels(points=torch.from_numpy(store.points(obj)),
                                         pose=torch.eye(3, 4), object_id=obj,
                                         collision_mode=mode, deferred=record))
    return objects


def warm_page_cache(paths: List[str]) -> None:
    for path in paths:
        with open(path, 'rb', buffering=0) as f:
            while f.read(64 * MIB):
                pass


def measure_read(store: LabelStore, num_rows: int, repeats: int) -> dict:
    objects = scene_objects(store, 'none')
    counts = np.array([o.num_points for o in objects])
    if num_rows > counts.sum():
        raise SystemExit(f'--rows {num_rows}: the first scene has only {counts.sum()} label points')
    # distinct label points in random order, as seeds match them
    flat = np.random.default_rng(0).choice(counts.sum(), num_rows, replace=False)
    owner = np.searchsorted(np.cumsum(counts), flat, side='right')
    rows = flat - np.concatenate([[0], np.cumsum(counts)[:-1]])[owner]
    owner_t, rows_t = torch.from_numpy(owner), torch.from_numpy(rows)
    nbytes = num_rows * int(np.prod(store.grid)) * 4
    scene = objects[0].deferred.scene
    warm_page_cache([o.deferred.object_file('scores') for o in objects]
                    + [objects[0].deferred.collision_file()])
    log(f'page cache warm; {num_rows} rows of {len(objects)} objects = {nbytes / MIB:.1f} MiB')

    out = gather_grids(objects, 'scores', owner_t, rows_t)
    check = np.load(objects[0].deferred.object_file('scores'), mmap_mode='r')
    first = int(np.flatnonzero(owner == 0)[0])
    assert out.shape == (num_rows, *store.grid) and np.array_equal(out[first], check[rows[first]])
    del out, check
    read = best_time(lambda: gather_grids(objects, 'scores', owner_t, rows_t), repeats)
    log(f"gather 'none': {read * 1e3:.1f} ms")
    # The host half of a CUDA gather: distinct rows, file order, into one reused buffer.
    files, reader_file = np.unique([o.deferred.object_file('scores') for o in objects],
                                   return_inverse=True)
    pair_file, pair_key, _ = distinct_in_file_order(reader_file[owner], rows)
    staging = np.empty((len(pair_key), *store.grid), np.float32)
    staged = best_time(lambda: read_rows(list(files), pair_file, pair_key, store.grid, staging),
                       repeats + 1)  # +1: the first call faults the buffer in
    log(f'staged read (read_rows into a reused buffer): {staged * 1e3:.1f} ms')
    del staging
    zero = scene_objects(store, 'zero_scores')
    zero_scores = best_time(lambda: gather_grids(zero, 'scores', owner_t, rows_t), repeats)
    log(f"gather 'zero_scores' (scene {scene}): {zero_scores * 1e3:.1f} ms")

    src = np.random.default_rng(1).random(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the destination in: a reused buffer, like the reader's
    memcpy = best_time(lambda: np.copyto(dst, src), repeats)
    log(f'memcpy: {memcpy * 1e3:.1f} ms')
    return dict(rows=num_rows, objects=len(objects), grid=list(store.grid), bytes=nbytes,
                read_s=read, read_gib_s=nbytes / read / 2 ** 30,
                staged_s=staged, staged_gib_s=nbytes / staged / 2 ** 30,
                zero_scores_s=zero_scores, zero_scores_gib_s=nbytes / zero_scores / 2 ** 30,
                memcpy_s=memcpy, memcpy_gib_s=nbytes / memcpy / 2 ** 30,
                gather_ratio=memcpy / read, read_ratio=memcpy / staged)


def measure_sample_bytes(store: LabelStore) -> dict:
    labels = max(scene_objects(store, 'none'), key=lambda o: o.num_points)
    record = labels.deferred
    kept = np.sort(np.random.default_rng(0).choice(record.num_points,
                                                   min(KEPT_ROWS, record.num_points),
                                                   replace=False)).astype(np.int32)
    deferred = ObjectGraspLabels(
        points=labels.points[kept].clone(), pose=labels.pose, object_id=labels.object_id,
        collision_mode='none',
        deferred=dataclasses.replace(record, rows=kept))
    dense = deferred.dense()
    deferred_bytes = len(pickle.dumps(deferred, protocol=5))
    dense_bytes = len(pickle.dumps(dense, protocol=5))
    log(f'one object, {len(kept)} kept rows: deferred {deferred_bytes} B, dense {dense_bytes} B')
    return dict(kept_rows=len(kept), deferred_bytes=deferred_bytes, dense_bytes=dense_bytes,
                dense_over_deferred=dense_bytes / deferred_bytes)


def prepare_store(root: Optional[str], workdir: str) -> LabelStore:
    if root is not None:
        return open_label_store(GraspNetReader(root))
    root = os.path.join(workdir, 'graspnet')
    log(f'writing a synthetic dataset (300x12x4 grid) to {root}')
    write_synthetic_dataset(root, scenes=1, frames=1, objects=2, models=2,
                            points_per_object=1400, grid=(300, 12, 4), image_size=(320, 180),
                            cameras=('realsense',), progress=False)
    log('building its label store')
    return open_label_store(GraspNetReader(root), cache_dir=os.path.join(workdir, 'cache'))


def report(store: LabelStore, read: dict, sample: dict) -> str:
    ok = {True: 'yes', False: 'NO'}
    return '\n'.join([
        f'deferred read, {read["rows"]} distinct rows of {read["objects"]} objects, '
        f'grid {tuple(store.grid)}, {read["bytes"] / MIB:.1f} MiB, torch {torch.__version__}, '
        f'{torch.get_num_threads()} threads',
        '',
        '| measure | time | value | target | met |',
        '|---|---|---|---|---|',
        f'| gather scores, collision none | {read["read_s"] * 1e3:.1f} ms | '
        f'{read["read_gib_s"]:.2f} GiB/s | | |',
        f'| staged read only (read_rows, reused buffer) | {read["staged_s"] * 1e3:.1f} ms | '
        f'{read["staged_gib_s"]:.2f} GiB/s | | |',
        f'| gather scores, zero_scores | {read["zero_scores_s"] * 1e3:.1f} ms | '
        f'{read["zero_scores_gib_s"]:.2f} GiB/s | | |',
        f'| np.copyto (memcpy) | {read["memcpy_s"] * 1e3:.1f} ms | '
        f'{read["memcpy_gib_s"]:.2f} GiB/s | | |',
        f'| read / memcpy: distinct rows, file order, into the reused buffer | | '
        f'{read["read_ratio"]:.2f} | >= {RATIO_TARGET} | {ok[read["read_ratio"] >= RATIO_TARGET]} |',
        f'| whole gather on the CPU / memcpy (adds the expansion into new memory) | | '
        f'{read["gather_ratio"]:.2f} | | |',
        f'| deferred object, {sample["kept_rows"]} rows (pickled) | | '
        f'{sample["deferred_bytes"] / 1024:.1f} KiB | < 64 KiB | '
        f'{ok[sample["deferred_bytes"] < DEFERRED_TARGET]} |',
        f'| dense equivalent (pickled) | | {sample["dense_bytes"] / MIB:.1f} MiB | | |',
        f'| dense / deferred | | {sample["dense_over_deferred"]:.0f}x | | |',
    ])


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    # stdout carries the table only: mmengine's logger, created on the store build's first
    # line, binds to the sys.stdout of that moment, here stderr.
    with tempfile.TemporaryDirectory(prefix='mmgrasp-bench-') as workdir, \
            contextlib.redirect_stdout(sys.stderr):
        store = prepare_store(args.root, workdir)
        read = measure_read(store, args.rows, args.repeats)
        sample = measure_sample_bytes(store)
    print(report(store, read, sample))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(read=read, sample=sample, torch=torch.__version__,
                           numpy=np.__version__, threads=torch.get_num_threads()), f, indent=1)


if __name__ == '__main__':
    main()
