#!/usr/bin/env python
"""Build HGGD's per-image grasps of one camera of a dataset root ahead of training.

They are derived from the label store (built first when missing or stale) with the rules of
HGGD's ``convert_grasp.py`` (see ``mmgrasp/storage/labels/hggd.py`` and
``docs/user_guides/hggd_labels.md``); training builds them lazily on first use otherwise. Scenes
are converted in ``--nproc`` processes; a build that is killed resumes from the scenes it had
not finished.

Usage:
    python tools/data/build_hggd_labels.py DATA_ROOT [--camera realsense] [--nproc 4]
        [--cache DIR] [--seed 0] [--apply-visibility] [--force]
"""
import argparse
import os
import sys
import time
from typing import List, Optional

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels.hggd_grasps import open_hggd_grasps
from mmgrasp.storage.labels.store import LabelStoreError
from mmgrasp.storage.source import DatasetFileError


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', metavar='DATA_ROOT')
    p.add_argument('--camera', default=None,
                   help="camera (default: the layout's, realsense; GraspClutter6D also takes "
                        'realsense-d415, azure-kinect, zivid)')
    p.add_argument('--nproc', type=int, default=1, help='scenes converted in parallel')
    p.add_argument('--cache', default=None, help='default $MMGRASP_CACHE or ~/.cache/mmgrasp')
    p.add_argument('--seed', type=int, default=0,
                   help='seed of the per-frame draws (model points, 5 000-grasp subsample)')
    p.add_argument('--apply-visibility', action='store_true',
                   help='drop grasps whose centre has no depth point within 1 cm (the '
                        'reference computes this mask but saves its labels without it)')
    p.add_argument('--force', action='store_true', help='rebuild even when current')
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not os.path.isdir(args.root):
        sys.exit(f'build_hggd_labels: error: {os.path.abspath(args.root)} is not a directory')
    if args.nproc < 1:
        sys.exit(f'build_hggd_labels: error: --nproc {args.nproc}: expected at least 1')
    t0 = time.perf_counter()
    try:
        grasps = open_hggd_grasps(open_reader(args.root, args.camera), args.cache,
                                  seed=args.seed, apply_visibility=args.apply_visibility,
                                  nproc=args.nproc, force=args.force)
    except (DatasetFileError, LabelStoreError, ValueError) as exc:
        sys.exit(f'build_hggd_labels: error: {exc}')
    seconds = time.perf_counter() - t0
    size = sum(os.path.getsize(os.path.join(d, n))
               for d, _, names in os.walk(grasps.path) for n in names)
    print(f'HGGD grasps: {grasps.path}')
    print(f'camera: {grasps.manifest["camera"]}  frames: {len(grasps)}  '
          f'grasps: {grasps.manifest["num_grasps"]}  seed: {grasps.manifest["seed"]}'
          f'{"  visibility applied" if grasps.manifest["apply_visibility"] else ""}')
    print(f'{seconds:.2f} s; {size / 2 ** 20:.2f} MiB on disk')


if __name__ == '__main__':
    main()
