#!/usr/bin/env python
"""What the economic labels cost: the asset's build time and size, and bytes per batch.

* build: the label store (from the raw npz files) and then the economic asset (from the
  store), each timed, with the asset's size on disk;
* bytes per batch (``--frames`` frames of one batch, ``--seeds`` seeds each, seeds drawn among
  each frame's label points): the bytes the deferred read copies out of the memory maps for
  the matched rows, against what the dense path puts in the samples (the decoded per-scene
  arrays of every frame, as EconomicGrasp's dataset loads them) and the stored bytes of those
  scenes;
* the sample leaving a worker: ``pickle.dumps`` of one frame's labels, deferred and dense.

Usage:
    python tools/analysis/benchmark_economic_labels.py DATA_ROOT [--cache DIR] [--frames 4]
        [--seeds 1024] [--json OUT]
"""
import argparse
import json
import os
import pickle
import tempfile
import time

import numpy as np
import torch

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels.economic_store import open_economic_labels
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.structures.economic_labels import (ROW_NAMES, EconomicFrameLabels,
                                                EconomicRowsRecord, decode_rows, read_rows)


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(folder)
               for n in names)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root')
    p.add_argument('--cache', default=None, help='default: a temporary folder')
    p.add_argument('--frames', type=int, default=4)
    p.add_argument('--seeds', type=int, default=1024)
    p.add_argument('--json', default=None)
    args = p.parse_args()
    cache = args.cache or tempfile.mkdtemp(prefix='econ_bench_')
    t0 = time.perf_counter()
    store = open_label_store(open_reader(args.root), cache)
    t1 = time.perf_counter()
    asset = open_economic_labels(store)
    t2 = time.perf_counter()
    scenes = sorted(asset.scenes)
    rng = np.random.default_rng(0)
    frame_scenes = [scenes[i % len(scenes)] for i in range(args.frames)]
    records = [EconomicRowsRecord(asset.path, s) for s in frame_scenes]
    owner = np.repeat(np.arange(args.frames), args.seeds)
    rows = np.concatenate([rng.integers(0, asset.scenes[s].instance_offsets[-1], args.seeds)
                           for s in frame_scenes])
    _, deferred_bytes = read_rows(records, owner, rows)
    dense_bytes = stored_bytes = 0
    for s in frame_scenes:
        stored = {n: asset.load(s, n, mmap=False) for n in ROW_NAMES}
        stored_bytes += sum(a.nbytes for a in stored.values())
        dense_bytes += sum(a.nbytes for a in decode_rows(stored).values())
    s = frame_scenes[0]
    points = torch.from_numpy(np.asarray(asset.load(s, 'points', mmap=False)))
    instance = torch.from_numpy(asset.load(s, 'pointid', mmap=False).astype(np.int64))
    poses = torch.zeros(len(asset.scenes[s].object_ids), 3, 4)
    index = torch.arange(len(points))
    dense = {k: torch.from_numpy(v) for k, v in decode_rows(
        {n: asset.load(s, n, mmap=False) for n in ROW_NAMES}).items()}
    pickled = {g: len(pickle.dumps(EconomicFrameLabels(points, instance, index, poses, **kw),
                                   protocol=5))
               for g, kw in (('deferred', dict(deferred=records[0])), ('dense', dict(dense=dense)))}
    result = dict(label_store_s=round(t1 - t0, 3), economic_s=round(t2 - t1, 3),
                  label_store_bytes=folder_bytes(store.path),
                  economic_bytes=folder_bytes(asset.path),
                  kept_points=sum(e.instance_offsets[-1] for e in asset.scenes.values()),
                  batch_frames=args.frames, seeds=args.seeds,
                  deferred_read_bytes=deferred_bytes, dense_sample_bytes=dense_bytes,
                  dense_stored_bytes=stored_bytes, pickled_frame_bytes=pickled)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
