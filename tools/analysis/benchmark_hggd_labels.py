#!/usr/bin/env python
"""Time and memory of converting frames into HGGD's per-image grasps (mmgrasp's asset rules).

Builds (or opens) the label store first, untimed, then converts every frame of the given scenes
as the asset's build does (one scene's labels read once, the frame's draws from (seed, scene,
camera, frame)) and prints seconds a frame, grasps and the process's peak resident memory over
its resident memory before the first frame; CPU seconds too (on a loaded machine wall time
is not the work). Compare with the reference on the same frames:
``tools/analysis/golden/make_hggd_labels_golden.py`` records the same figures for ``convert_grasp.py``.
Run both with one thread (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python tools/analysis/benchmark_hggd_labels.py \
        DATA_ROOT --scenes 0 1 --frames 2 [--camera realsense] [--cache DIR]
"""
import argparse
import json
import resource
import tempfile
import time
from typing import List, Optional

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels import hggd
from mmgrasp.storage.labels.hggd_grasps import SceneLabels
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.utils.random import frame_rng


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', metavar='DATA_ROOT')
    p.add_argument('--camera', default=None)
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True, help='frames 0..N-1 of each scene')
    p.add_argument('--cache', default=None, help='label store cache (default: a temporary one)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--json', default=None, help='also write the figures here')
    return p.parse_args(argv)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: Optional[List[str]] = None) -> dict:
    args = parse_args(argv)
    reader = open_reader(args.root, args.camera)
    store = open_label_store(reader, args.cache or tempfile.mkdtemp(prefix='hggd_bench_'))
    base = peak_rss_mib()
    grasps, per_frame = 0, []
    t0, c0 = time.perf_counter(), time.process_time()
    for scene in args.scenes:
        labels = SceneLabels(reader, store, scene)
        for frame in range(args.frames):
            t = time.perf_counter()
            arrays, _ = labels.convert(frame, hggd.FrameDraws(
                frame_rng(args.seed, scene, reader.camera, frame)))
            per_frame.append(round(time.perf_counter() - t, 3))
            grasps += len(arrays['object_ids'])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    frames = len(args.scenes) * args.frames
    result = dict(frames=frames, grasps=grasps, wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                  s_per_frame=round(wall / frames, 3), frame_s=per_frame,
                  peak_rss_mib=round(peak_rss_mib(), 1), rss_before_mib=round(base, 1))
    print(json.dumps(result))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == '__main__':
    main()
