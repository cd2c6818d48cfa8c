"""Grasp dumps made from a dataset's labels, for the evaluator's sanity tests.

Ground truth as graspnetAPI's ``loadGrasp(format='6d')`` builds it (label point p, view v,
angle, depth; rotation pose_R @ R(-v, angle), translation pose @ p, score 1.1 - mu), keeping
cells with 0 < mu <= 0.4, no scene collision and a width the gripper opens to (<= 0.1 m).
"""
import os

import numpy as np

from mmgrasp.datasets.synthetic.labels import grasp_frames
from mmgrasp.evaluation.graspnet_dump_eval import read_annotation


def label_grasps(root, scene, frame, per_object, rng, camera='realsense', mu_max=0.4):
    cdir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
    objects = read_annotation(os.path.join(cdir, 'annotations', f'{frame:04d}.xml'))
    collision = np.load(os.path.join(root, 'collision_label', f'scene_{scene:04d}',
                                     'collision_labels.npz'))
    out = []
    for i, (obj_id, pose) in enumerate(objects):
        lab = np.load(os.path.join(root, 'grasp_label', f'{obj_id:03d}_labels.npz'))
        points, offsets, mu = lab['points'], lab['offsets'], lab['scores']
        _, v, a, d = mu.shape
        ok = (mu > 0) & (mu <= mu_max) & ~collision[f'arr_{i}'] & (offsets[..., 2] <= 0.1)
        cells = np.argwhere(ok)
        cells = cells[rng.choice(len(cells), min(per_object, len(cells)), replace=False)]
        p, vi, ai, di = cells.T
        frames = grasp_frames(v, a)[vi, ai]  # columns: approach, jaw axis, height
        pose64 = pose.astype(np.float64)
        rows = np.zeros((len(cells), 17))
        rows[:, 0] = 1.1 - mu[p, vi, ai, di]
        rows[:, 1] = offsets[p, vi, ai, di, 2]
        rows[:, 2] = 0.02
        rows[:, 3] = offsets[p, vi, ai, di, 1]
        rows[:, 4:13] = (pose64[:3, :3] @ frames).reshape(-1, 9)
        rows[:, 13:16] = points[p] @ pose64[:3, :3].T + pose64[:3, 3]
        rows[:, 16] = obj_id
        out.append(rows)
    return np.concatenate(out).astype(np.float32)


def random_grasps(root, scene, frame, n, rng, camera='realsense'):
    """Random rotations, widths, depths and scores at jittered model points."""
    gt = label_grasps(root, scene, frame, 50, rng, camera)
    at = gt[rng.integers(0, len(gt), n), 13:16] + rng.normal(scale=0.005, size=(n, 3))
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    rot = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                    2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                    2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], 1)
    rows = np.zeros((n, 17))
    rows[:, 0], rows[:, 1], rows[:, 2] = rng.random(n), rng.uniform(0.01, 0.1, n), 0.02
    rows[:, 3] = rng.choice([0.01, 0.02, 0.03, 0.04], n)
    rows[:, 4:13], rows[:, 13:16], rows[:, 16] = rot, at, -1
    return rows.astype(np.float32)


def shifted_grasps(grasps, rng, distance=0.05):
    """The grasps moved ``distance`` in random directions, off their objects."""
    d = rng.normal(size=(len(grasps), 3))
    out = grasps.copy()
    out[:, 13:16] += (distance * d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)
    return out
