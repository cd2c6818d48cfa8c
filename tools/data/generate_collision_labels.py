#!/usr/bin/env python
"""Scene collision labels (``collision_label/scene_%04d/collision_labels.npz``) of a
GraspNet-1Billion-layout root whose ``grasp_label/`` and ``models/`` exist (e.g. written by
``generate_grasp_labels.py``): every label cell of every object of frame 0's meta against the
other objects' model points and the table, with the gripper of ``grasp_label/gripper.json``
(GraspNet's when absent). Scenes run in ``--nproc`` processes, each file written atomically;
scenes whose file exists are skipped unless ``--force``.

    python tools/data/generate_collision_labels.py data/mine --nproc 2
"""
import argparse
import concurrent.futures as cf
import os
import sys
import time

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.labelgen.scenes import write_collision_labels
from mmgrasp.geometry import GRASPNET_GRIPPER, read_gripper_file


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='dataset root (scenes/, models/, grasp_label/)')
    p.add_argument('--scenes', type=int, nargs='+', default=None,
                   help='scene ids (default: every scene on disk)')
    p.add_argument('--camera', default='realsense', help="whose frame 0 gives the poses")
    p.add_argument('--nproc', type=int, default=1)
    p.add_argument('--force', action='store_true', help='recompute existing files')
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    gripper_path = os.path.join(args.root, 'grasp_label', 'gripper.json')
    gripper = read_gripper_file(gripper_path) if os.path.isfile(gripper_path) \
        else GRASPNET_GRIPPER
    scenes = args.scenes if args.scenes is not None else \
        GraspNetReader(args.root, args.camera).present_scenes()
    todo = [s for s in scenes if args.force or not os.path.isfile(os.path.join(
        args.root, 'collision_label', f'scene_{s:04d}', 'collision_labels.npz'))]
    print(f'[collision] {len(todo)} of {len(scenes)} scenes, gripper {gripper.describe()}',
          flush=True)
    t0, failed = time.time(), 0
    with cf.ProcessPoolExecutor(max(1, args.nproc)) as pool:
        futures = {pool.submit(write_collision_labels, args.root, s, gripper, args.camera): s
                   for s in todo}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            try:
                print(f'[collision] scene {futures[fut]:04d} ({n}/{len(todo)}): {fut.result()} '
                      f'({time.time() - t0:.0f} s)', flush=True)
            except Exception as err:  # noqa: BLE001 - reported per scene, the rest go on
                failed += 1
                print(f'[collision] scene {futures[fut]:04d} FAILED: {type(err).__name__}: '
                      f'{err}', file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
