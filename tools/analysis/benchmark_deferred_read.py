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

* with ``--assigner``, label matching at paper size (batch 4, 1 024 seeds per frame, the
  recipes' assigners, ``'zero_scores'``): stage one and two on dense grids, on deferred labels
  through whole rows (the reader before μ codes and summaries) and through the matched cells
  (per-view summaries, then the chosen view's cells): bytes copied out of the memory maps per
  batch, assigner time, and the peak memory the assigner adds to the process (a forked child
  per run, its peak RSS reset first through /proc/self/clear_refs).

Usage:
    python tools/analysis/benchmark_deferred_read.py [--root DIR] [--rows 2500] [--repeats 5]
        [--assigner] [--json OUT]

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
from mmgrasp.models.assigners import NearestLabelAssigner, ScaleBalancedAssigner
from mmgrasp.storage.labels.store import LabelStore, open_label_store
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.readers.common import distinct_in_file_order, pop_map_copy_bytes, read_rows
from mmgrasp.structures.grasp_labels import ObjectGraspLabels, gather_grids
from mmgrasp.structures.label_batch import GraspLabelBatch

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
    p.add_argument('--assigner', action='store_true',
                   help='also measure label matching (dense, whole rows, matched cells)')
    p.add_argument('--frames', type=int, default=4, help='--assigner: frames per batch')
    p.add_argument('--seeds', type=int, default=1024, help='--assigner: seeds per frame')
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


#: the recipes' assigners (configs/_base_/models): GSNet, GraspNet-baseline, Scale-Balanced-Grasp
RECIPES = dict(
    gsnet=lambda v: NearestLabelAssigner(num_views=v),
    bl=lambda v: NearestLabelAssigner(all_view_widths=True, with_tolerance=True,
                                      view_graspness=False, gsnet_score_norm=False, num_views=v),
    sbg=lambda v: ScaleBalancedAssigner(num_views=v, scale_statistic=dict(
        interval=list(np.linspace(0.003, 0.1, 33)), num=[1 + k for k in range(32)])))
PATHS = ('dense', 'whole rows', 'matched cells')


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def assigner_batch(store: LabelStore, frames: int, seeds: int, dense: bool, seed: int = 0):
    """``frames`` frames holding every instance of the store's first scene with a quarter of
    its label points kept (at least 300, as the recipes), random poses, and seeds at random
    kept label points (jittered by 2 mm), with random chosen views."""
    rng = np.random.default_rng(seed)
    scene = min(store.scenes)
    objects, poses, frame_of, seed_points = [], [], [], []
    for b in range(frames):
        frame_points = []
        for instance, obj in enumerate(store.scenes[scene].object_ids):
            n = store.objects[obj].num_points
            kept = np.sort(rng.choice(n, min(max(n // 4, 300), n), replace=False))
            record = StoreGrids(store=store.path, object_id=obj, rows=kept.astype(np.int32),
                                grid=store.grid, collision_mode='zero_scores',
                                has_tolerance=store.objects[obj].has_tolerance, scene=scene,
                                collision_offset=store.collision_row_offset(scene, instance),
                                matched_cells=store.objects[obj].score_codes)
            pose = np.concatenate([_random_rotation(rng), rng.normal(size=(3, 1)) * 0.1], 1)
            labels = ObjectGraspLabels(points=torch.from_numpy(store.points(obj)[kept]),
                                       pose=torch.from_numpy(pose.astype(np.float32)),
                                       object_id=obj, collision_mode='zero_scores',
                                       deferred=record)
            objects.append(labels.dense() if dense else labels)
            poses.append(labels.pose)
            frame_of.append(b)
            frame_points.append(labels.points.numpy() @ pose[:, :3].T + pose[:, 3])
        cloud = np.concatenate(frame_points)
        picked = cloud[rng.choice(len(cloud), seeds)]
        seed_points.append(picked + rng.normal(scale=0.002, size=picked.shape))
    counts = [o.num_points for o in objects]
    batch = GraspLabelBatch(
        objects=objects, points=torch.cat([o.points for o in objects]),
        point_object=torch.repeat_interleave(torch.arange(len(objects)), torch.tensor(counts)),
        point_row=torch.cat([torch.arange(n) for n in counts]), poses=torch.stack(poses),
        object_frame=torch.tensor(frame_of),
        object_ids=torch.tensor([o.object_id for o in objects]), num_frames=frames)
    top_view = torch.from_numpy(rng.integers(store.grid[0], size=(frames, seeds)))
    return batch, torch.from_numpy(np.stack(seed_points).astype(np.float32)), top_view


def _peak_growth_mib(fn: Callable[[], object]) -> float:
    """Peak RSS that ``fn`` adds to this process (its peak reset first through
    /proc/self/clear_refs; grid-sized blocks are mapped and unmapped, so what earlier runs
    freed is not counted)."""
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')  # VmHWM := the current RSS
    before = _status_kib('VmRSS')
    fn()
    return (_status_kib('VmHWM') - before) / 1024


def _status_kib(key: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    raise KeyError(key)


def measure_assigner(store: LabelStore, frames: int, seeds: int, repeats: int) -> dict:
    """Per recipe and path: bytes copied out of the maps per batch, assigner time (stage one
    and two, best of ``repeats``), peak memory added; and checks the three paths agree."""
    warm_page_cache([f for obj in store.objects for f in (
        store.object_file(obj, n) for n in ('scores', 'widths', 'score_codes', 'tolerance'))
        if os.path.exists(f)] + [store.collision_file(s) for s in store.scenes])
    batches = {'dense': assigner_batch(store, frames, seeds, dense=True)}
    batches['whole rows'] = batches['matched cells'] = assigner_batch(store, frames, seeds,
                                                                      dense=False)
    out = {}
    for recipe, make in RECIPES.items():
        results = {}
        for path in PATHS:
            assigner = make(store.grid[0])
            if path == 'whole rows':
                assigner._reads_summaries = lambda labels: False
            labels, seed_points, top_view = batches[path]

            def run():
                matched = assigner.assign(seed_points, labels)
                return assigner.match_view(matched, top_view, labels)

            matched = run()
            pop_map_copy_bytes()
            run()
            nbytes = pop_map_copy_bytes()
            seconds = best_time(run, repeats)
            peak = _peak_growth_mib(run)
            results[path] = dict(bytes=nbytes, seconds=seconds, peak_mib=peak)
            results[path]['_matched'] = matched
            log(f'{recipe} {path}: {nbytes / MIB:.2f} MiB read, {seconds * 1e3:.0f} ms, '
                f'peak +{peak:.0f} MiB')
        consumed = ('view_graspness', 'view_labels', 'score_max', 'scale_weight',
                    'robust_graspable', 'top_view_rot', 'top_scores', 'top_widths',
                    'top_tolerance')
        for path in PATHS[1:]:
            for name in consumed:
                a = getattr(results['dense']['_matched'], name)
                b = getattr(results[path]['_matched'], name)
                assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), \
                    f'{recipe}: {name} differs between dense and {path}'
        for path in PATHS:
            del results[path]['_matched']
        out[recipe] = results
    return out


def assigner_report(assigner: dict, frames: int, seeds: int) -> str:
    lines = [f'label matching, batch {frames}, {seeds} seeds per frame, collision zero_scores '
             f'(bytes copied out of the memory maps per batch; time of stage one and two, '
             f'best of the repeats; peak memory added by the assigner)', '',
             '| recipe | path | bytes read | time (ms) | peak memory (MiB) |',
             '|---|---|---|---|---|']
    for recipe, results in assigner.items():
        for path, r in results.items():
            lines.append(f'| {recipe} | {path} | {r["bytes"] / MIB:.2f} MiB | '
                         f'{r["seconds"] * 1e3:.0f} | {r["peak_mib"]:.0f} |')
    lines += ['', '| recipe | bytes: matched cells / whole rows (goal <= 1/40) | '
              'time: matched cells / dense (goal <= 0.25) | time: matched cells / whole rows |',
              '|---|---|---|---|']
    for recipe, r in assigner.items():
        cells, rows, dense = r['matched cells'], r['whole rows'], r['dense']
        lines.append(f'| {recipe} | 1/{rows["bytes"] / cells["bytes"]:.0f} | '
                     f'{cells["seconds"] / dense["seconds"]:.3f} | '
                     f'{cells["seconds"] / rows["seconds"]:.3f} |')
    return '\n'.join(lines)


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
        assigner = measure_assigner(store, args.frames, args.seeds, args.repeats) \
            if args.assigner else None
    print(report(store, read, sample))
    if assigner is not None:
        print()
        print(assigner_report(assigner, args.frames, args.seeds))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(read=read, sample=sample, assigner=assigner,
                           torch=torch.__version__, numpy=np.__version__,
                           threads=torch.get_num_threads()), f, indent=1)


if __name__ == '__main__':
    main()
