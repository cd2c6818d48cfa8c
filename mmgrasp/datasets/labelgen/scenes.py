"""Scenes of one's own objects in GraspNet-1Billion's layout: the scene writer (object poses
and rendered or recorded depth in, a scene folder out) and the scene collision labels.

**Scene collision** (``collision_label/scene_%04d/collision_labels.npz``, ``arr_i`` for the
i-th object of frame 0's ``meta`` ``cls_indexes``): a label cell collides when it collides with
its own object (the label file's ``collision``), when a point of another object (its model
points, 8 mm voxels of ``nontextured.ply``, posed as frame 0 says) lies in a finger or the base
of the gripper (the evaluator's point test), or when the gripper's hull (fingers, base and the
space between the fingers) reaches below the table top (z = 0 of the table frame), as the
synthetic writer's collision labels (``points_collision``). Only cells with μ > 0 are tested:
no reader looks at the others.

**The writer** lays out ``scenes/scene_%04d/<camera>/`` from object poses in the table frame and
camera poses: ``camK.npy``, ``camera_poses.npy``, ``cam0_wrt_table.npy``, per frame ``depth``,
``label``, ``rgb`` (PNG), ``meta`` (.mat) and ``annotations`` (.xml), and the scene's
``object_id_list.txt``, each file through a temporary name. Depth and segmentation are the
user's (a simulator's or a sensor's) or are ray-cast from the objects' ``textured.sdf`` with the synthetic writer's renderer.
"""
from __future__ import annotations

import io
import os
from typing import Optional, Sequence

import numpy as np

from mmgrasp.geometry import GRASPNET_GRIPPER, Gripper, read_dexnet_sdf
from ..graspnet_reader import GraspNetReader
from ..synthetic.graspnet import FACTOR_DEPTH, RS_WRT_KN, annotation_xml, savemat_bytes
from ..synthetic.labels import points_collision
from ..synthetic.scene import MAX_DEPTH, render, write_png
from ..synthetic.shapes import Shape
from .objects import model_points


def scene_collision_labels(root: str, scene: int, gripper: Gripper = GRASPNET_GRIPPER,
                           camera: str = 'realsense') -> list:
    """The collision arrays of ``scene`` (one per instance of frame 0's meta, in its order)."""
    reader = GraspNetReader(root, camera)
    meta = reader.load_meta(scene, 0)
    to_table = reader.trajectory(scene).camera_to_table(0)
    poses = []
    for pose in meta.poses:
        m = np.eye(4)
        m[:3] = pose
        poses.append(to_table @ m)  # model -> table
    ids = [int(i) for i in meta.object_ids]
    points = {i: model_points(os.path.join(root, 'models', f'{i:03d}')) for i in set(ids)}
    arrays = []
    for n, (obj, pose) in enumerate(zip(ids, poses)):
        label = reader.load_grasp_label(obj, gripper.grid)
        inv = np.linalg.inv(pose)
        others = [points[o] @ (inv @ p)[:3, :3].T + (inv @ p)[:3, 3]
                  for k, (o, p) in enumerate(zip(ids, poses)) if k != n]
        obstacles = np.concatenate(others) if others else np.zeros((0, 3))
        arrays.append(points_collision(label['scores'], label['widths'], label['points'],
                                       gripper.grid, obstacles, table_pose=pose,
                                       skip=label['self_collision'], gripper=gripper))
    return arrays


def write_collision_labels(root: str, scene: int, gripper: Gripper = GRASPNET_GRIPPER,
                           camera: str = 'realsense') -> str:
    """Compute and write ``collision_label/scene_%04d/collision_labels.npz`` (atomically)."""
    arrays = scene_collision_labels(root, scene, gripper, camera)
    folder = os.path.join(root, 'collision_label', f'scene_{scene:04d}')
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, 'collision_labels.npz')
    tmp = f'{path}.tmp{os.getpid()}.npz'
    np.savez(tmp, *arrays)
    os.replace(tmp, path)
    return path


def _write(path: str, data: bytes) -> None:
    tmp = f'{path}.tmp{os.getpid()}'  # every file through a temporary name
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, path)


def _save(path: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array)
    _write(path, buf.getvalue())


class FieldModel:
    """A ``textured.sdf`` as the synthetic renderer's shape: ``half`` (a box about the model
    origin holding the grid) and ``sdf(points)``, sphere-traced by :meth:`Shape.ray_depths`."""

    ray_depths = Shape.ray_depths

    def __init__(self, sdf_path: str):
        self.field = read_dexnet_sdf(sdf_path)
        far = self.field.origin + (self.field.dims - 1) * self.field.resolution
        self.half = np.maximum(np.abs(self.field.origin), np.abs(far))

    def sdf(self, points: np.ndarray) -> np.ndarray:
        return self.field(self.field.to_grid(points))


def write_scene(root: str, scene: int, object_ids: Sequence[int],
                object_poses: Sequence[np.ndarray], camera_poses: Sequence[np.ndarray],
                intrinsics: np.ndarray, image_size: tuple = (1280, 720),
                camera: str = 'realsense', depths: Optional[Sequence[np.ndarray]] = None,
                segmentations: Optional[Sequence[np.ndarray]] = None,
                rgbs: Optional[Sequence[np.ndarray]] = None) -> None:
    """Lay out ``scenes/scene_%04d/<camera>/`` under ``root``.

    Args:
        object_ids: model ids (``models/%03d/``) of the scene's objects.
        object_poses: 4x4 model -> table of each object.
        camera_poses: 4x4 camera (OpenCV axes) -> table of each frame.
        intrinsics: 3x3 camera matrix of ``image_size`` (W, H).
        depths: per frame (H, W) metres (0: no reading); None ray-casts ``textured.sdf``.
        segmentations: per frame (H, W) 0 background, k = index in ``object_ids`` + 1; needed
            with ``depths``.
        rgbs: per frame (H, W, 3) uint8; None writes a grey image shaded by depth.
    """
    ids = [int(i) for i in object_ids]
    if len(object_poses) != len(ids) or not len(camera_poses):
        raise ValueError(f'scene {scene}: {len(ids)} object ids, {len(object_poses)} object '
                         f'poses, {len(camera_poses)} camera poses')
    if (depths is None) != (segmentations is None):
        raise ValueError(f'scene {scene}: give depths and segmentations together, or neither '
                         'to ray-cast them')
    sdir = os.path.join(root, 'scenes', f'scene_{scene:04d}')
    cdir = os.path.join(sdir, camera)
    for sub in ('rgb', 'depth', 'label', 'meta', 'annotations'):
        os.makedirs(os.path.join(cdir, sub), exist_ok=True)
    _write(os.path.join(sdir, 'object_id_list.txt'), ''.join(f'{i}\n' for i in ids).encode())
    _save(os.path.join(sdir, 'rs_wrt_kn.npy'), RS_WRT_KN)
    cam0 = np.asarray(camera_poses[0], np.float64)
    cam0_inv = np.linalg.inv(cam0)
    _save(os.path.join(cdir, 'camK.npy'), np.asarray(intrinsics, np.float64))
    _save(os.path.join(cdir, 'camera_poses.npy'),
          np.stack([cam0_inv @ np.asarray(p, np.float64) for p in camera_poses]))
    _save(os.path.join(cdir, 'cam0_wrt_table.npy'), cam0)
    fields = None
    if depths is None:
        fields = [FieldModel(os.path.join(root, 'models', f'{i:03d}', 'textured.sdf'))
                  for i in ids]
    cls_indexes = np.array([[i + 1 for i in ids]], np.int64)
    for f, cam_wrt_table in enumerate(camera_poses):
        cam_wrt_table = np.asarray(cam_wrt_table, np.float64)
        if fields is not None:
            z, seg, _ = render(intrinsics, image_size, cam_wrt_table, object_poses,
                               [m.half for m in fields], [i + 1 for i in ids], fields)
            z = np.where(z <= MAX_DEPTH, z, 0)
        else:
            z = np.asarray(depths[f], np.float64)
            seg = np.asarray(segmentations[f])
            seg = np.where(seg > 0, np.asarray([0] + [i + 1 for i in ids])[seg], 0)
        depth = np.round(z * FACTOR_DEPTH).astype(np.uint16)
        seg = np.where(depth > 0, seg, 0).astype(np.uint8)
        rgb = rgbs[f] if rgbs is not None else np.repeat(
            np.where(depth > 0, np.clip(255 - 100 * z, 60, 255), 0)[..., None], 3,
            -1).astype(np.uint8)
        name = f'{f:04d}'
        write_png(os.path.join(cdir, 'rgb', name + '.png'), rgb)
        write_png(os.path.join(cdir, 'depth', name + '.png'), depth)
        write_png(os.path.join(cdir, 'label', name + '.png'), seg)
        cam_inv = np.linalg.inv(cam_wrt_table)
        in_camera = [cam_inv @ np.asarray(p, np.float64) for p in object_poses]
        _write(os.path.join(cdir, 'annotations', name + '.xml'),
               annotation_xml(ids, in_camera).encode())
        meta = {'poses': np.stack([p[:3] for p in in_camera], axis=2).astype(np.float32),
                'cls_indexes': cls_indexes, 'intrinsic_matrix': np.asarray(intrinsics),
                'factor_depth': np.array([[FACTOR_DEPTH]], np.float64)}
        _write(os.path.join(cdir, 'meta', name + '.mat'), savemat_bytes(meta))
