#!/usr/bin/env python
"""Write GSNet's graspness labels in the reference layout (graspness/scene_%04d/<camera>/%04d.npy).

    python tools/data/generate_graspness.py DATA_ROOT [--camera realsense] [--scenes 0 1 ...]
        [--cache DIR] [--overwrite]

Reads grids from the label store (built first if needed), so it is fast and needs no GPU.
"""
import argparse
import sys

from mmgrasp.datasets.graspness import generate_graspness
from mmgrasp.datasets.graspnet_reader import DatasetFileError
from mmgrasp.storage.labels.store import LabelStoreError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root')
    parser.add_argument('--camera', default='realsense',
                        help="GraspNet-1Billion: realsense, kinect; GraspClutter6D: "
                             "realsense-d415, realsense-d435, azure-kinect, zivid (or the aliases)")
    parser.add_argument('--scenes', type=int, nargs='+', default=None,
                        help='scene ids (default: every train scene on disk)')
    parser.add_argument('--cache', default=None, help='label store cache (default $MMGRASP_CACHE)')
    parser.add_argument('--overwrite', action='store_true', help='rewrite existing files')
    args = parser.parse_args()
    try:
        count = generate_graspness(args.data_root, args.camera, args.scenes, args.cache,
                                   overwrite=args.overwrite)
    except (DatasetFileError, LabelStoreError, ValueError) as exc:
        sys.exit(f'generate_graspness: error: {exc}')
    print(f'wrote {count} graspness files')


if __name__ == '__main__':
    main()
