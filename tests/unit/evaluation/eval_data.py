"""A tiny dataset in the layout the GraspNet evaluator reads: spheres on a table.

Objects are spheres (radius 0.03 m) with dense surface points and an SDF that is curved along
lines (as dexnet's contact search needs); frames share one camera looking straight down.
"""
import os

import numpy as np
from plyfile import PlyData, PlyElement

from mmgrasp.geometry import write_dexnet_sdf

RADIUS = 0.03
CENTRES = [np.array([0.0, 0.0, 0.5]), np.array([0.12, 0.0, 0.5])]  # camera frame


def _sphere_points(n=2000, seed=0):
    p = np.random.default_rng(seed).normal(size=(n, 3))
    return RADIUS * p / np.linalg.norm(p, axis=1, keepdims=True)


def write_eval_dataset(root, scene=100, frames=2, camera='realsense', ids=(0, 1)):
    """Write scenes/scene_<scene>/<camera>/{annotations,camera_poses.npy,cam0_wrt_table.npy}
    and models/%03d/{nontextured.ply,textured.sdf}; returns the object centres (camera)."""
    res, n = 0.003, 41
    origin = np.full(3, -(n - 1) / 2 * res)
    grid = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing='ij'), -1) * res + origin
    for i in ids:
        mdir = os.path.join(root, 'models', f'{i:03d}')
        os.makedirs(mdir, exist_ok=True)
        pts = _sphere_points(seed=i).astype(np.float32)
        vertex = np.array([tuple(p) for p in pts], dtype=[('x', 'f4'), ('y', 'f4'), ('z', 'f4')])
        PlyData([PlyElement.describe(vertex, 'vertex')]).write(os.path.join(mdir,
                                                                            'nontextured.ply'))
        write_dexnet_sdf(os.path.join(mdir, 'textured.sdf'),
                         (np.sum(grid ** 2, -1) - RADIUS ** 2) / (2 * RADIUS), origin, res)
    cdir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
    os.makedirs(os.path.join(cdir, 'annotations'), exist_ok=True)
    # camera at the origin looking down +z; the table plane is z = 0.53 (the spheres rest on it)
    cam0_wrt_table = np.eye(4)
    cam0_wrt_table[:3, :3] = np.diag([1.0, -1.0, -1.0])
    cam0_wrt_table[2, 3] = 0.5 + RADIUS
    np.save(os.path.join(cdir, 'cam0_wrt_table.npy'), cam0_wrt_table.astype(np.float32))
    np.save(os.path.join(cdir, 'camera_poses.npy'), np.tile(np.eye(4, dtype=np.float32),
                                                           (frames, 1, 1)))
    for f in range(frames):
        objs = ''.join(
            f'<obj><obj_id>{i}</obj_id><obj_name>{i:03d}.ply</obj_name>'
            f'<obj_path>models/{i:03d}.ply</obj_path>'
            f'<pos_in_world>{c[0]} {c[1]} {c[2]}</pos_in_world>'
            f'<ori_in_world>1.0 0.0 0.0 0.0</ori_in_world></obj>'
            for i, c in zip(ids, CENTRES))
        with open(os.path.join(cdir, 'annotations', f'{f:04d}.xml'), 'w') as fh:
            fh.write(f'<scene>{objs}</scene>')
    return CENTRES[:len(ids)]


def top_down_grasp(score, centre, width=0.08, depth=0.02, dy=0.0):
    """A grasp approaching along +z (camera view) with jaws along x, 1 cm above ``centre``."""
    rot = np.stack([[0, 0, 1.0], [1.0, 0, 0], [0, 1.0, 0]], axis=1)
    t = np.asarray(centre) + np.array([0, dy, -0.02])
    return np.concatenate([[score, width, 0.02, depth], rot.reshape(-1), t, [-1]])


def write_dump(dump_dir, scene, frame, rows, camera='realsense'):
    folder = os.path.join(dump_dir, f'scene_{scene:04d}', camera)
    os.makedirs(folder, exist_ok=True)
    np.save(os.path.join(folder, f'{frame:04d}.npy'), np.asarray(rows, np.float32).reshape(-1, 17))
