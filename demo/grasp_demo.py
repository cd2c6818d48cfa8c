#!/usr/bin/env python
"""A picture of the grasps a detector predicts on one depth image.

    python demo/grasp_demo.py DEPTH.png (--intrinsics K.npy | --meta meta.mat) --config CONFIG \
        --checkpoint W (--mask MASK.png | --all-readings) [--factor-depth 1000] [--rgb RGB.png] \
        [--top-k 20] [--view camera|side] --out grasps.png
    python demo/grasp_demo.py --data-root ROOT --scene 100 --frame 0 [--camera realsense] \
        --config CONFIG --checkpoint W [--top-k 20] [--view camera|side] --out grasps.png

DEPTH is a 16-bit PNG (metres × factor depth), K.npy the (3, 3) camera matrix; ``--meta`` reads
both the matrix (``intrinsic_matrix``) and the depth factor (``factor_depth``) from a GraspNet
meta file instead (``scenes/*/<camera>/meta/%04d.mat``, or graspnet-baseline's
``doc/example_data/meta.mat``). MASK is the workspace
(non-zero pixels kept; the models were trained on the dataset's workspace, see GraspInferencer;
``--all-readings`` instead keeps every reading). ``--data-root/--scene/--frame`` takes a
dataset frame instead: its depth, meta and RGB image, and its workspace by the dataset's own rule
(the segmentation and the camera's table pose, margin from the config's ``LoadGraspScene``; the
frame's meta file alone cannot give it: the table pose lives in the scene's camera poses), so
the grasps are the ones tools/test.py dumps for that frame. The picture
has the depth image's size, plus a strip at its right for the score's legend (so that it covers
no grasp): from the camera (``--view camera``) the RGB image or the cloud
coloured by depth, from the side (``--view side``: the cloud turned 45° about the camera's x
axis, looking along the table) the cloud in its RGB colours or by depth; on it the ``top-k``
grippers as thin GraspNet outlines coloured by score. It is rendered
offscreen with matplotlib's Agg backend (comes with mmengine, needs no display or GL).
``--save-grasps`` also writes the (N, 17) GraspGroup array (for a dataset frame exactly what
tools/test.py dumps for it, after the grasp NMS); ``--cfg-options`` overrides the config (e.g.
the collision filter's ``model.test_cfg.collision_thresh``), checked as tools/train.py checks
it. Output folders are created. Input that cannot be a depth image, camera matrix or mask (a
float or 8-bit depth, depth in metres, a ``.mat`` given as ``--intrinsics``, a colour PNG given
as ``--mask``) is refused with one line naming the file, what is wrong and the fix.

The score the legend shows is the method's own: GSNet's predicted grasp score (its labels
range 0-1), GraspNet-baseline's score × tolerance / 0.05, EconomicGrasp's and FineGrasp's
Σ 0.2k·logit_k over six score classes (raw logits, as their ``pred_decode`` ranks grasps; not
a probability, often negative). The evaluation only ranks grasps within a frame, so the
figures of two methods are not on one scale.

An RGB-D model (HGGD: its test pipeline starts with ``LoadRGBDImage``) needs the colour image
(``--rgb``, or the dataset frame's) and no workspace: it sees the whole image, as its reference
does; ``--clip-depth 1.0`` clips the depth as the reference's demo does (readings beyond 1 m
become 1 m), which flattens a far background. A frame whose intrinsics are not the config's
camera's is warned about (its field of view, fx / width, more than 5 % off). A dataset frame gets the intrinsics and the draws tools/test.py gives it (HGGD's
hard-coded intrinsics for GraspNet-1Billion's cameras).
"""
import argparse
import os
import sys

import cv2
import numpy as np
import scipy.io
from mmengine.config import Config, DictAction

from mmgrasp.apis import (GraspInferencer, apply_cli_options, check_intrinsics, read_depth,
                          register_all_modules)
from mmgrasp.evaluation.grasp_drawing import (back_project, depth_colours, draw_scene, side_view,
                                              top_grasps)
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.datasets.transforms.depth_image import implausible_depth
from mmgrasp.datasets.transforms.hggd import reference_intrinsics
from mmgrasp.storage.frames.store import frame_workspace
from mmgrasp.utils.checkpoint_keys import CheckpointMismatchError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('depth', nargs='?', help='16-bit depth PNG (not with --scene)')
    camera = parser.add_mutually_exclusive_group()
    camera.add_argument('--intrinsics', help='(3, 3) camera matrix, .npy')
    camera.add_argument('--meta', help='GraspNet meta .mat: intrinsic_matrix and factor_depth')
    parser.add_argument('--config', required=True)
    parser.add_argument('--checkpoint', required=True)
    parser.add_argument('--out', required=True, help='PNG to write')
    parser.add_argument('--factor-depth', type=float, default=None,
                        help="depth units per metre (default: the meta file's, else 1000)")
    parser.add_argument('--mask', help='workspace mask PNG (non-zero: keep)')
    parser.add_argument('--all-readings', action='store_true',
                        help='no workspace mask: keep every reading (not what the models saw)')
    parser.add_argument('--data-root', help='dataset root of --scene/--frame')
    parser.add_argument('--scene', type=int, help="a dataset frame: its depth, meta, RGB and "
                        "the dataset's workspace")
    parser.add_argument('--frame', type=int, help='frame index in --scene')
    parser.add_argument('--camera', default=None, help="camera of --scene (default: the "
                        "layout's, realsense)")
    parser.add_argument('--rgb', help='colour image of the same size, drawn instead of depth')
    parser.add_argument('--clip-depth', type=float, metavar='METRES',
                        help='RGB-D models: readings beyond it are set to it before the model '
                        "sees them, as HGGD's reference demo clips at 1.0 m (a depth model takes "
                        '--mask instead)')
    parser.add_argument('--top-k', type=int, default=20)
    parser.add_argument('--view', choices=('camera', 'side'), default='camera')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--scale', type=int, default=1, help='picture size / depth image size')
    parser.add_argument('--save-grasps', help='also write the grasps (N, 17) as .npy')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, e.g. model.test_cfg.collision_thresh=0')
    return parser.parse_args(argv)


def read_meta(path: str) -> tuple:
    """(3x3 intrinsics, factor depth) of a GraspNet meta file; SystemExit naming the file and
    the key when one is missing or malformed."""
    try:
        meta = scipy.io.loadmat(path)
    except (OSError, ValueError, TypeError) as err:
        raise SystemExit(f'{path}: cannot read the meta file ({err})') from None
    for key in ('intrinsic_matrix', 'factor_depth'):
        if key not in meta:
            raise SystemExit(f'{path}: no {key!r} (a GraspNet meta file holds intrinsic_matrix '
                             'and factor_depth)')
    intrinsics = np.asarray(meta['intrinsic_matrix'], np.float64)
    factor = np.asarray(meta['factor_depth'], np.float64).reshape(-1)
    if intrinsics.shape != (3, 3) or not np.isfinite(intrinsics).all() or \
            intrinsics[0, 0] <= 0 or intrinsics[1, 1] <= 0:
        raise SystemExit(f'{path}: intrinsic_matrix must be a finite 3x3 camera matrix with '
                         f'positive focal lengths, got {intrinsics.tolist()}')
    if factor.shape != (1, ) or not np.isfinite(factor[0]) or factor[0] <= 0:
        raise SystemExit(f'{path}: factor_depth must be one positive number, got '
                         f'{factor.tolist()}')
    return intrinsics, float(factor[0])


def read_intrinsics(path: str) -> np.ndarray:
    """The (3, 3) camera matrix of a ``.npy`` (or ``.txt``) file; SystemExit naming the file."""
    if not os.path.isfile(path):
        raise SystemExit(f'{path}: no such file')
    if path.endswith('.mat'):
        raise SystemExit(f'{path}: --intrinsics takes a (3, 3) camera matrix as .npy; a GraspNet '
                         f'meta file goes to --meta {path} (its intrinsic_matrix and '
                         f'factor_depth)')
    try:
        k = np.loadtxt(path) if path.endswith('.txt') else np.load(path, allow_pickle=False)
        return check_intrinsics(k)
    except (OSError, ValueError) as err:
        raise SystemExit(f'{path}: not a camera matrix ({err}); save one with '
                         f'np.save(path, K), K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]') from None


def read_mask(path: str, shape) -> np.ndarray:
    """(H, W) bool workspace of a mask PNG (non-zero kept): one channel, or channels that are
    equal, of two values at most; SystemExit naming the file otherwise (a colour image used to
    be taken as "every pixel")."""
    image = _image(path, shape, 'workspace mask')
    if image.ndim == 3:
        colour = image[..., :3]
        if (colour != colour[..., :1]).any():
            raise SystemExit(f'{path}: a colour image is not a workspace mask: give a '
                             f'single-channel PNG whose non-zero pixels are the workspace '
                             f'(tools/data/write_workspace_mask.py writes one for a dataset '
                             f'frame), or --all-readings')
        image = colour[..., 0]
    values = np.unique(image)
    if len(values) > 2:
        raise SystemExit(f'{path}: {len(values)} distinct values, but a workspace mask holds two '
                         f'(0 outside, one value inside): is it a grey or depth image? Give the '
                         f'mask PNG')
    if not values.any():
        raise SystemExit(f'{path}: every pixel is 0, the workspace is empty')
    return image > 0


def _image(path: str, shape, what: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise SystemExit(f'{path}: no such file (the {what})')
    image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise SystemExit(f'{path}: cannot decode the {what} as an image')
    if image.shape[:2] != shape:
        raise SystemExit(f'{path}: {what} is {image.shape[:2]}, the depth image {shape}')
    return image


def dataset_frame(args: argparse.Namespace, cfg: Config, with_rgb: bool) -> tuple:
    """(depth, intrinsics, factor depth, workspace, RGB path or None, frame id) of
    ``--scene/--frame``: the workspace by the dataset's rule with the margin of the config's
    ``LoadGraspScene`` (an RGB-D model: every reading, and the intrinsics it is tested with),
    and the id ``(scene, camera, frame)`` the test dataset draws the frame's points with."""
    if args.scene is None or args.frame is None or args.data_root is None:
        raise SystemExit('a dataset frame needs --data-root, --scene and --frame')
    given = [flag for name, flag in (('depth', 'DEPTH.png'), ('intrinsics', '--intrinsics'),
                                     ('meta', '--meta'), ('mask', '--mask'),
                                     ('all_readings', '--all-readings'))
             if getattr(args, name)]
    if given:
        raise SystemExit(f'--scene/--frame reads the depth, meta and workspace of the frame: '
                         f'drop {", ".join(given)}')
    load = cfg.test_dataloader.dataset.pipeline[0]
    try:
        reader = open_reader(args.data_root, args.camera)
        depth = reader.load_depth(args.scene, args.frame)
        meta = reader.load_meta(args.scene, args.frame)
        mask = (frame_workspace(reader, args.scene, args.frame, float(load.get('outlier', 0.02)))
                if load.get('use_workspace', True) and not with_rgb else depth > 0)
    except ValueError as err:  # DatasetFileError names the file; a bad frame its range
        raise SystemExit(str(err)) from None
    rgb = reader.frame_path(args.scene, 'rgb', args.frame)
    intrinsics = (reference_intrinsics(reader.layout, reader.camera, meta.intrinsics)
                  if with_rgb else meta.intrinsics)
    return (depth, intrinsics, meta.factor_depth, mask, rgb if os.path.isfile(rgb) else None,
            (args.scene, reader.camera, args.frame))


def check_depth_scale(depth: np.ndarray, mask: np.ndarray, factor_depth: float,
                      source: str) -> None:
    """Refuse a workspace whose nearest reading is nearer than a depth camera sees: depth in
    metres, or a wrong --factor-depth (the inferencer only warns; the grasps would be
    nonsense)."""
    readings = depth[mask & (depth > 0)]
    if not readings.size:
        raise SystemExit(f'{source}: no depth reading inside the workspace mask')
    text = implausible_depth(readings.min(), factor_depth, source)
    if text is not None:
        raise SystemExit(text + '; depth saved in metres: (d * 1000).astype(np.uint16) with '
                         '--factor-depth 1000')


def _output(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    register_all_modules(False)
    # tools/train.py's merge and checks: a key nothing reads, an option a class does not take,
    # a string where a number goes; and the config's torch thread count
    cfg = apply_cli_options(Config.fromfile(args.config), args.config, args.cfg_options, None)
    with_rgb = cfg.test_dataloader.dataset.pipeline[0].get('type') == 'LoadRGBDImage'
    if with_rgb and (args.mask or args.all_readings):
        raise SystemExit('an RGB-D model sees the whole image: drop --mask / --all-readings (to '
                         'keep a far background out: --clip-depth METRES)')
    if args.clip_depth is not None and not with_rgb:
        raise SystemExit('--clip-depth is for RGB-D models; a depth model takes a workspace: '
                         '--mask MASK.png')
    frame_id = None
    if args.scene is not None or args.frame is not None:
        depth, intrinsics, meta_factor, mask, frame_rgb, frame_id = dataset_frame(args, cfg,
                                                                                  with_rgb)
        source = f'{args.data_root} scene {args.scene} frame {args.frame}'
    else:
        if args.depth is None or not (args.intrinsics or args.meta):
            raise SystemExit('give DEPTH.png with --intrinsics K.npy or --meta meta.mat, or a '
                             'dataset frame: --data-root ROOT --scene S --frame F')
        try:
            depth = read_depth(args.depth)
        except (OSError, TypeError, ValueError) as err:
            raise SystemExit(str(err)) from None
        if args.meta:
            intrinsics, meta_factor = read_meta(args.meta)
        else:
            intrinsics, meta_factor = read_intrinsics(args.intrinsics), 1000.0
        if args.mask is None and not args.all_readings and not with_rgb:
            raise SystemExit('a workspace is needed: --mask MASK.png (or --all-readings, or a '
                             "dataset frame's own: --data-root ROOT --scene S --frame F)")
        mask = depth > 0 if args.mask is None else read_mask(args.mask, depth.shape)
        frame_rgb, source = None, args.depth
    factor_depth = meta_factor if args.factor_depth is None else args.factor_depth
    if not factor_depth > 0:
        raise SystemExit(f'--factor-depth {factor_depth:g}: expected depth units per metre > 0 '
                         f'(1000 for millimetres)')
    check_depth_scale(depth, mask, factor_depth, source)
    colour = None
    if args.rgb or frame_rgb:
        colour = _image(args.rgb or frame_rgb, depth.shape, 'RGB image')
        colour = cv2.cvtColor(colour[..., :3], cv2.COLOR_BGR2RGB)
    if with_rgb and colour is None:
        raise SystemExit('an RGB-D model (its test pipeline loads RGB-D images) needs the colour '
                         'image: --rgb RGB.png')
    rgb = None if colour is None else colour.astype(np.float64) / 255
    out = _output(args.out)
    try:
        inferencer = GraspInferencer(cfg, args.checkpoint, args.device)
        grasps = (inferencer(depth, intrinsics, factor_depth, rgb=colour, frame_id=frame_id,
                             clip_depth=args.clip_depth)
                  if with_rgb else
                  inferencer(depth, intrinsics, factor_depth, mask, frame_id=frame_id))
    except CheckpointMismatchError as err:  # tools/test.py's strict-load message
        raise SystemExit(f'error: {err}') from None
    except ValueError as err:  # no reading left within max_depth: the range seen, the fix
        raise SystemExit(f'{source}: {err}') from None
    if args.save_grasps:
        np.save(_output(args.save_grasps), grasps)
    score_label = type(inferencer.model).score_label
    shown = top_grasps(grasps, args.top_k)
    title = (f'top {len(shown)} of {len(grasps)} grasps, best score {grasps[0, 0]:.3f}'
             if len(grasps) else 'no grasp')
    if args.view == 'camera':
        image = rgb if rgb is not None else depth_colours(depth, mask)
        draw_scene(image, out, intrinsics, shown, title=title, scale=args.scale,
                   score_label=score_label)
    else:
        points, pixels = back_project(depth, intrinsics, factor_depth, mask)
        colours = (rgb.reshape(-1, 3) if rgb is not None
                   else depth_colours(depth, mask).reshape(-1, 3))[pixels]
        points, shown = side_view(points, shown)
        draw_scene(np.ones(depth.shape + (3, )), out, intrinsics, shown, points=points,
                   point_colours=colours, point_size=2.0 * args.scale, scale=args.scale,
                   title=title + ', seen from the side', score_label=score_label)
    print(f'{len(grasps)} grasps; drew the top {len(shown)} in {out} (score: {score_label})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
