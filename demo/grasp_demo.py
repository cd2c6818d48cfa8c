#!/usr/bin/env python
"""A picture of the grasps a detector predicts on one depth image.

    python demo/grasp_demo.py DEPTH.png --intrinsics K.npy --config CONFIG --checkpoint W \
        [--factor-depth 1000] [--mask MASK.png] [--rgb RGB.png] [--top-k 20] --out grasps.png

DEPTH is a 16-bit PNG (metres × factor depth), K.npy the (3, 3) camera matrix, MASK the workspace
(non-zero pixels kept; the models were trained on the dataset's workspace, see GraspInferencer;
``--all-readings`` instead keeps every reading). The picture has the depth image's size, from the
camera's viewpoint: the cloud coloured by depth (or the RGB image), the ``top-k`` grippers in
GraspNet's shape (fingers, base and approach line), the best one in yellow. It is rendered
offscreen with matplotlib's Agg backend (comes with mmengine, needs no display or GL).
``--save-grasps`` also writes the (N, 17) GraspGroup array; ``--cfg-options`` overrides the config
(e.g. the collision filter's ``model.test_cfg.collision_thresh``).
"""
import argparse
import sys

import cv2
import numpy as np
from mmengine.config import Config, DictAction

from mmgrasp.apis import GraspInferencer, read_depth
from mmgrasp.apis.grasp_drawing import depth_colours, draw_scene, top_grasps


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('depth', help='16-bit depth PNG')
    parser.add_argument('--intrinsics', required=True, help='(3, 3) camera matrix, .npy')
    parser.add_argument('--config', required=True)
    parser.add_argument('--checkpoint', required=True)
    parser.add_argument('--out', required=True, help='PNG to write')
    parser.add_argument('--factor-depth', type=float, default=1000.0)
    parser.add_argument('--mask', help='workspace mask PNG (non-zero: keep)')
    parser.add_argument('--all-readings', action='store_true',
                        help='no workspace mask: keep every reading (not what the models saw)')
    parser.add_argument('--rgb', help='colour image of the same size, drawn instead of depth')
    parser.add_argument('--top-k', type=int, default=20)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--scale', type=int, default=1, help='picture size / depth image size')
    parser.add_argument('--save-grasps', help='also write the grasps (N, 17) as .npy')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, e.g. model.test_cfg.collision_thresh=0')
    return parser.parse_args(argv)


def _image(path: str, shape, what: str) -> np.ndarray:
    image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise SystemExit(f'{path}: cannot read the {what}')
    if image.shape[:2] != shape:
        raise SystemExit(f'{path}: {what} is {image.shape[:2]}, the depth image {shape}')
    return image


def main(argv=None) -> int:
    args = parse_args(argv)
    depth = read_depth(args.depth)
    intrinsics = np.load(args.intrinsics)
    if args.mask is None and not args.all_readings:
        raise SystemExit('a workspace is needed: --mask MASK.png (or --all-readings)')
    mask = depth > 0 if args.mask is None else _image(args.mask, depth.shape, 'mask') > 0
    if mask.ndim == 3:
        mask = mask.any(axis=-1)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    inferencer = GraspInferencer(cfg, args.checkpoint, args.device)
    grasps = inferencer(depth, intrinsics, args.factor_depth, mask)
    if args.save_grasps:
        np.save(args.save_grasps, grasps)
    if args.rgb:
        rgb = _image(args.rgb, depth.shape, 'RGB image')
        image = cv2.cvtColor(rgb, cv2.COLOR_BGR2RGB).astype(np.float64) / 255
    else:
        image = depth_colours(depth, mask)
    shown = top_grasps(grasps, args.top_k)
    draw_scene(image, args.out, intrinsics, shown,
               title=f'{len(shown)} of {len(grasps)} grasps, best score {grasps[0, 0]:.3f}'
               if len(grasps) else 'no grasp', scale=args.scale)
    print(f'{len(grasps)} grasps; drew the top {len(shown)} in {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
