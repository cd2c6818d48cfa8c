#!/usr/bin/env python
"""Write a dataset frame's workspace mask as a PNG (255 kept, 0 dropped), by the rule the
dataset loads its masked cloud with: readings inside the table-frame box of the segmented
objects, grown by ``--outlier`` per side (graspnet-baseline's ``workspace_mask.png``).

    python tools/data/write_workspace_mask.py DATA_ROOT --scene 100 --frame 0 \
        [--camera realsense] [--outlier 0.02 | --config CONFIG] --out workspace.png

``--config`` takes the margin from the config's test pipeline (``LoadGraspScene.outlier``), the
one a model of that config saw. The PNG feeds ``demo/grasp_demo.py --mask`` (which also takes
``--data-root/--scene/--frame`` to apply the same rule itself).
"""
import argparse
import os
import sys

import cv2
import numpy as np
from mmengine.config import Config

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.frames.store import frame_workspace


def config_outlier(path: str) -> float:
    """The workspace margin of the config's test pipeline (LoadGraspScene's default 0.02)."""
    steps = Config.fromfile(path).test_dataloader.dataset.pipeline
    load = [s for s in steps if s.get('type') == 'LoadGraspScene']
    if not load:
        raise SystemExit(f'{path}: the test pipeline has no LoadGraspScene')
    if not load[0].get('use_workspace', True):
        raise SystemExit(f'{path}: LoadGraspScene(use_workspace=False) keeps every reading; '
                         'there is no workspace to write')
    return float(load[0].get('outlier', 0.02))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root')
    parser.add_argument('--scene', type=int, required=True)
    parser.add_argument('--frame', type=int, required=True, help='frame index in the scene')
    parser.add_argument('--camera', default=None, help="default: the layout's ('realsense')")
    margin = parser.add_mutually_exclusive_group()
    margin.add_argument('--outlier', type=float, default=None,
                        help='box margin per side, metres (default 0.02)')
    margin.add_argument('--config', help="take the margin from this config's test pipeline")
    parser.add_argument('--out', required=True, help='PNG to write')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    outlier = config_outlier(args.config) if args.config else \
        0.02 if args.outlier is None else args.outlier
    if not outlier >= 0:
        raise SystemExit(f'--outlier must be >= 0 metres, got {outlier}')
    if not args.out.endswith('.png'):
        raise SystemExit(f'{args.out}: --out must be a .png')
    try:
        reader = open_reader(args.data_root, args.camera)
        mask = frame_workspace(reader, args.scene, args.frame, outlier)
    except ValueError as err:  # DatasetFileError names the file; a bad frame names its range
        raise SystemExit(str(err)) from None
    tmp = f'{args.out}.tmp{os.getpid()}.png'
    if not cv2.imwrite(tmp, mask.astype(np.uint8) * 255):
        raise SystemExit(f'{args.out}: cannot write the PNG')
    os.replace(tmp, args.out)
    print(f'{args.out}: {int(mask.sum())} of {mask.size} pixels in the workspace of scene '
          f'{args.scene} frame {args.frame} ({reader.camera}, margin {outlier:g} m)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
