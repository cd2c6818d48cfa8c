#!/usr/bin/env python
"""Dump the grasps the labels hold, as a detector's dump: what a perfect detector reaches under
the evaluator (the ceiling a trained demo's AP is read against).

    python tools/analysis/label_oracle_dump.py DATA_ROOT --scenes 100 130 160 --dump DIR \
        [--camera realsense] [--per-object 50] [--mu-max 0.4] [--seed 0]
    python tools/analysis/eval_dump.py DATA_ROOT DIR --camera realsense --scenes 100 130 160

Per frame and object of the frame's meta, the label cells graspnetAPI's ``loadGrasp('6d')``
keeps (0 < mu <= ``--mu-max``, no scene collision; here also no self-collision and a width the
gripper opens to, <= 0.1 m) become GraspGroup rows: score 1.1 - mu, width and depth from the
label's offsets, rotation pose_R @ R(approach = -view, angle), translation pose @ label point,
object id. The ``--per-object`` best cells (lowest mu; ties broken by a draw from ``--seed``,
scene and frame) are kept, so the evaluator's NMS and top-50 see the labels' best grasps.
"""
import argparse
import os
import sys

import numpy as np
import torch

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.geometry.grasp_frames import (GRASP_HEIGHT, GRASP_MAX_WIDTH,
                                                 approach_to_matrix, generate_grasp_views)


def object_grasps(label: dict, offsets: np.ndarray, collision: np.ndarray, pose: np.ndarray,
                  object_id: int, per_object: int, mu_max: float,
                  rng: np.random.Generator) -> np.ndarray:
    """(n, 17) float32 rows of one object's best label cells (see the module docstring)."""
    mu, widths = label['scores'], offsets[..., 2]
    keep = (mu > 0) & (mu <= mu_max) & ~collision & ~label['self_collision'] & \
        (widths <= GRASP_MAX_WIDTH)
    cells = np.argwhere(keep)
    if not len(cells):
        return np.zeros((0, 17), np.float32)
    order = np.lexsort((rng.random(len(cells)), mu[tuple(cells.T)]))[:per_object]
    p, v, a, d = cells[order].T
    views = generate_grasp_views(mu.shape[1]).double()[torch.from_numpy(v)]
    angles = torch.from_numpy(offsets[p, v, a, d, 0].astype(np.float64))
    rotation = approach_to_matrix(-views, angles).numpy()  # (n, 3, 3) object frame
    rows = np.zeros((len(p), 17))
    rows[:, 0] = 1.1 - mu[p, v, a, d]
    rows[:, 1] = widths[p, v, a, d]
    rows[:, 2] = GRASP_HEIGHT
    rows[:, 3] = offsets[p, v, a, d, 1]
    rows[:, 4:13] = (pose[:3, :3] @ rotation).reshape(-1, 9)
    rows[:, 13:16] = label['points'][p] @ pose[:3, :3].T + pose[:3, 3]
    rows[:, 16] = object_id
    return rows.astype(np.float32)


def frame_grasps(reader, scene: int, frame: int, per_object: int, mu_max: float,
                 seed: int) -> np.ndarray:
    meta = reader.load_meta(scene, frame)
    collisions = reader.load_collision(scene, meta)
    rng = np.random.default_rng([seed, scene, frame])
    rows = []
    for i, obj in enumerate(meta.object_ids):
        label = reader.load_grasp_label(int(obj))
        with reader.open_grasp_label(int(obj)) as npz:
            offsets = np.asarray(npz['offsets'], np.float64)
        rows.append(object_grasps(label, offsets, collisions[i], meta.poses[i].astype(np.float64),
                                  int(obj), per_object, mu_max, rng))
    return np.concatenate(rows) if rows else np.zeros((0, 17), np.float32)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('data_root')
    parser.add_argument('--scenes', type=int, nargs='+', required=True)
    parser.add_argument('--dump', required=True, help='dump folder to write')
    parser.add_argument('--camera', default='realsense')
    parser.add_argument('--per-object', type=int, default=50)
    parser.add_argument('--mu-max', type=float, default=0.4)
    parser.add_argument('--seed', type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.per_object < 1 or not 0 < args.mu_max <= 1.0:
        raise SystemExit(f'--per-object must be >= 1 and --mu-max in (0, 1], got '
                         f'{args.per_object} and {args.mu_max}')
    try:
        reader = open_reader(args.data_root, args.camera)
        for scene in args.scenes:
            folder = os.path.join(args.dump, f'scene_{scene:04d}', args.camera)
            os.makedirs(folder, exist_ok=True)
            counts = []
            for frame in range(reader.num_frames(scene)):
                grasps = frame_grasps(reader, scene, frame, args.per_object, args.mu_max,
                                      args.seed)
                path = os.path.join(folder, f'{frame:04d}.npy')
                tmp = f'{path}.tmp-{os.getpid()}'
                with open(tmp, 'wb') as f:
                    np.save(f, grasps)
                os.replace(tmp, path)
                counts.append(len(grasps))
            print(f'scene {scene}: {len(counts)} frames, {min(counts)}-{max(counts)} grasps a '
                  f'frame')
    except ValueError as err:  # DatasetFileError names the file
        raise SystemExit(str(err)) from None
    return 0


if __name__ == '__main__':
    sys.exit(main())
