"""An independent numpy implementation of HGGD's ``convert_grasp.py`` 6-D dataset, written from
the reference (THU-VCLab/HGGD @69580ff: ``convert_grasp.py``, ``util.py``, the vendored
graspnetAPI's ``loadGrasp``/``loadSceneModel``) and working from the RAW files of a root: the
annotation XML (GraspNet-1Billion) or ``scene_gt.json`` (GraspClutter6D), the grasp label npz
(angles and depths from ``offsets``), the collision npz and the model PLY.

It follows the script literally: every cell tiled and masked at once, rotations per cell, the
refinement on all drawn model points in one product per block of grasps, a plain greedy NMS.
Each rule is a parameter so that mutation tests show that the comparisons catch it.
"""
import json
import os
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional, Tuple

import cv2
import numpy as np

from mmgrasp.datasets.model_files import read_ply_points
from mmgrasp.geometry import libm, quaternion_to_graspnet_pose
from mmgrasp.geometry.sorting import std_sort_descending

FIELDS = ('centers_2d', 'opens_2d', 'thetas_rad', 'gammas_rad', 'betas_rad', 'widths_2d',
          'heights_2d', 'scores_from_6d', 'object_ids', 'center_z_depths')
HARD_CODED = {'realsense': (927.17, 927.37, 651.32, 349.62),
              'kinect': (631.55, 631.21, 638.43, 366.50)}
GC6D_INDEX = {'realsense-d415': 1, 'realsense-d435': 2, 'azure-kinect': 3, 'zivid': 4}
GC6D_SCALE = {'realsense-d415': 1000.0, 'realsense-d435': 1000.0, 'azure-kinect': 10000.0,
              'zivid': 10000.0}


def raw_frame(root: str, camera: str, scene: int, frame: int) -> dict:
    """The raw inputs of one frame: objects (id, pose, label arrays, collision, model points),
    camera pose, projection intrinsics and image size, and the visibility cloud's depth image,
    intrinsics and scale."""
    gc6d = os.path.isdir(os.path.join(root, 'scenes', f'{scene:06d}'))
    if gc6d:
        sdir = os.path.join(root, 'scenes', f'{scene:06d}')
        image = 4 * frame + GC6D_INDEX[camera]
        with open(os.path.join(sdir, 'scene_gt.json')) as f:
            gt = json.load(f)[str(image)]
        with open(os.path.join(sdir, 'scene_camera.json')) as f:
            cam_k = np.asarray(json.load(f)[str(image)]['cam_K'], np.float64).reshape(3, 3)
        objects = []
        for inst in gt:
            pose = np.eye(4)
            pose[:3, :3] = np.asarray(inst['cam_R_m2c'], np.float64).reshape(3, 3)
            pose[:3, 3] = np.asarray(inst['cam_t_m2c'], np.float64) / 1000.0
            objects.append((inst['obj_id'] - 1, pose))
        label_file = lambda i: os.path.join(root, 'grasp_label', f'obj_{i + 1:06d}_labels.npz')
        model_file = lambda i: os.path.join(root, 'models_m', f'obj_{i + 1:06d}.ply')
        collision_file = os.path.join(root, 'collision_label', f'{scene:06d}.npz')
        depth = cv2.imread(os.path.join(sdir, 'depth', f'{image:06d}.png'), cv2.IMREAD_UNCHANGED)
        out = dict(camera_pose=None, intrinsics=cam_k, image_size=depth.shape[::-1],
                   depth=depth, cloud_intrinsics=cam_k, factor=GC6D_SCALE[camera])
    else:
        cdir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
        objects = []
        for obj in ET.parse(os.path.join(cdir, 'annotations', f'{frame:04d}.xml')).getroot():
            fields = list(obj)
            objects.append((int(fields[0].text), quaternion_to_graspnet_pose(
                fields[3].text.split(), fields[4].text.split())))
        label_file = lambda i: os.path.join(root, 'grasp_label', f'{i:03d}_labels.npz')
        model_file = lambda i: os.path.join(root, 'models', f'{i:03d}', 'nontextured.ply')
        collision_file = os.path.join(root, 'collision_label', f'scene_{scene:04d}',
                                      'collision_labels.npz')
        fx, fy, cx, cy = HARD_CODED[camera]
        out = dict(camera_pose=np.load(os.path.join(cdir, 'camera_poses.npy'))[frame],
                   intrinsics=np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], np.float64),
                   image_size=(1280, 720),
                   depth=cv2.imread(os.path.join(cdir, 'depth', f'{frame:04d}.png'),
                                    cv2.IMREAD_UNCHANGED),
                   cloud_intrinsics=np.load(os.path.join(cdir, 'camK.npy')), factor=1000.0)
    with np.load(collision_file) as npz:
        collision = [npz[f'arr_{i}'] for i in range(len(npz.files))]
    out['objects'] = []
    for i, (obj, pose) in enumerate(objects):
        with np.load(label_file(obj)) as npz:
            label = {k: npz[k].astype(np.float32) for k in ('points', 'offsets', 'scores')}
        out['objects'].append(dict(id=obj, pose=pose, collision=collision[i],
                                   model=read_ply_points(model_file(obj)), **label))
    return out


def _views(n: int) -> np.ndarray:
    i = np.arange(n, dtype=np.float32)
    z = (2 * i + 1) / n - 1
    phi = np.float32((np.sqrt(5) - 1) / 2)  # numpy 1.23 casts the float64 scalar to float32
    return np.stack([np.sqrt(1 - z ** 2) * np.cos(2 * i * np.pi * phi),
                     np.sqrt(1 - z ** 2) * np.sin(2 * i * np.pi * phi), z], axis=1)


def _rotation(towards: np.ndarray, angle: np.ndarray) -> np.ndarray:
    x = towards
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(len(x), x.dtype)], axis=-1)
    y[np.linalg.norm(y, axis=-1) == 0] = np.array([0, 1, 0])
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = y / np.linalg.norm(y, axis=-1, keepdims=True)
    z = np.cross(x, y)
    one, zero = np.ones(len(x), x.dtype), np.zeros(len(x), x.dtype)
    rx = np.stack([one, zero, zero, zero, np.cos(angle), -np.sin(angle), zero, np.sin(angle),
                   np.cos(angle)], axis=-1).reshape(-1, 3, 3)
    return np.matmul(np.stack([x, y, z], axis=-1), rx).astype(np.float32)


def _homogeneous(points: np.ndarray, trans: np.ndarray) -> np.ndarray:
    ones = np.ones([len(points), 1], dtype=points.dtype)
    return np.matmul(trans, np.concatenate([points, ones], axis=-1).T).T[:, :3]


def load_grasp_6d(raw: dict, max_mu: float = 0.2, mu_dtype=np.float32) -> np.ndarray:
    """graspnetAPI's loadGrasp('6d'): (n, 17) float64 rows of float32 values."""
    rows = [np.zeros((0, 17))]
    cp = raw['camera_pose']
    for obj in raw['objects']:
        trans = obj['pose'] if cp is None else np.dot(cp, obj['pose'])
        n = len(obj['points'])
        v, a, d = obj['scores'].shape[1:]
        mu = obj['scores'].astype(mu_dtype)
        mask = (mu <= mu_dtype(max_mu)) & (mu > 0) & ~obj['collision']
        points = np.tile(obj['points'][:, None, None, None, :], [1, v, a, d, 1])[mask]
        views = np.tile(_views(v)[None, :, None, None, :], [n, 1, a, d, 1])[mask]
        points = _homogeneous(points, trans)
        rot = np.matmul(trans[None, :3, :3], _rotation(-views, obj['offsets'][..., 0][mask]))
        if cp is not None:
            points = _homogeneous(points, np.linalg.inv(cp))
            rot = np.matmul(np.linalg.inv(cp)[None, :3, :3], rot)
        k = int(mask.sum())
        rows.append(np.hstack([(1.1 - obj['scores'][mask]).reshape(-1, 1),
                               obj['offsets'][..., 2][mask].reshape(-1, 1),
                               0.02 * np.ones((k, 1)), obj['offsets'][..., 1][mask].reshape(-1, 1),
                               rot.reshape(-1, 9), points,
                               obj['id'] * np.ones((k, 1), np.int32)]).astype(np.float32))
    return np.concatenate(rows)


def refine(grasps: np.ndarray, points: np.ndarray, block: int = 64) -> np.ndarray:
    """convert_grasp.py's centre refinement on every point, ``block`` grasps at a time."""
    # the script's operand: C-ordered (its points are a fancy-indexed draw), read transposed;
    # einsum rounds differently on another memory layout
    homo = np.ascontiguousarray(np.concatenate([points, np.ones((len(points), 1))], axis=1))
    out = grasps.copy()
    for s in range(0, len(grasps), block):
        g = grasps[s:s + block]
        rt = g[:, 4:13].reshape(-1, 3, 3).transpose(0, 2, 1)
        g2l = np.eye(4)[None].repeat(len(g), 0)
        g2l[:, :3, :3] = rt
        g2l[:, :3, 3:4] = -np.matmul(rt, g[:, 13:16, None])
        local = np.einsum('ijk,kn->ijn', g2l, homo.transpose(1, 0)).transpose(0, 2, 1)[..., :3]
        h, d, w = g[:, 2:3], g[:, 3:4], g[:, 1:2]
        m = ((local[..., 2] > -h / 2) & (local[..., 2] < h / 2) & (local[..., 0] > d - 0.04)
             & (local[..., 0] < d) & (local[..., 1] > -w / 2) & (local[..., 1] < w / 2))
        lo = ((local[..., 1] - 10) * m).min(1) + 10
        hi = ((local[..., 1] + 10) * m).max(1) - 10
        c = np.zeros((len(g), 4))
        c[:, 3] += 1
        c[:, 1] = (lo + hi) / 2
        out[s:s + block, 13:16] = np.einsum('ijk,ki->ij', np.linalg.inv(g2l), c.T)[:, :3]
    return out


def greedy_nms(grasps: np.ndarray, dist: float, angle: float) -> np.ndarray:
    """Best first (grasp_nms's sort order for ties), drop what a kept grasp is near in both
    translation and rotation."""
    rows = grasps[std_sort_descending(grasps[:, 0])]
    kept: List[int] = []
    for i, row in enumerate(rows):
        others = rows[kept]
        close = np.linalg.norm(others[:, 13:16] - row[13:16], axis=1) < dist
        traces = np.einsum('nij,ij->n', others[:, 4:13].reshape(-1, 3, 3),
                           row[4:13].reshape(3, 3))  # trace(R_kept R_row^T)
        if not np.any(close & (np.arccos(np.clip((traces - 1) / 2, -1, 1)) < angle)):
            kept.append(i)
    return rows[kept]


def _key_points(t: np.ndarray, rot: np.ndarray, widths: np.ndarray) -> np.ndarray:
    k = np.zeros((len(t), 4, 3), np.float32)
    k[:, 1:, 1] -= widths[:, None] / 2
    k[:, 2, 2] += 0.01
    k[:, 3, 2] -= 0.01
    return np.matmul(rot, k.transpose(0, 2, 1)).transpose(0, 2, 1) + t[:, None, :]


def _pixels(p: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.stack([p[:, 0] / p[:, 2] * k[0, 0] + k[0, 2], p[:, 1] / p[:, 2] * k[1, 1] + k[1, 2]],
                    axis=-1)


def rectangles(g: np.ndarray, k: np.ndarray) -> Dict[str, np.ndarray]:
    """grasp2rect and around: the saved fields of every grasp."""
    rot, w = g[:, 4:13].reshape(-1, 3, 3), g[:, 1]
    c2d = _pixels(g[:, 13:16], k)
    zmm = 1000.0 * g[:, 15]
    axis = np.zeros((len(g), 3))
    axis[:, 2] = zmm / 1000
    kp = _key_points(axis, rot, w)
    rect = np.concatenate([_pixels(kp[:, 0], k), _pixels(kp[:, 1], k),
                           np.linalg.norm(_pixels(kp[:, 2], k) - _pixels(kp[:, 3], k), axis=-1,
                                          keepdims=True), g[:, [0]], g[:, [16]]], axis=-1
                          ).astype(np.float32)
    dx, dy = rect[:, 0] - rect[:, 2], rect[:, 1] - rect[:, 3]
    # the C library's angles, as the script's numpy computed them (mmgrasp.geometry.libm)
    theta = libm.arctan2(dy, -dx)
    gamma = libm.arcsin(np.clip((kp[:, 1, 2] - kp[:, 0, 2]) * 2 / w, -1, 1))
    beta = libm.arcsin(np.clip((kp[:, 2, 2] - kp[:, 3, 2]) / np.cos(gamma) / g[:, 2], -1, 1))
    width = np.sqrt(np.square(dx) + np.square(dy)) * 2
    width /= np.cos(gamma)
    height = rect[:, 4].copy()
    height *= 2 / (1 + np.sqrt(1 - np.square(np.cos(gamma) * np.sin(beta))))
    opens = np.stack([c2d[:, 0] - width / 2 * np.cos(theta),
                      c2d[:, 1] + width / 2 * np.sin(theta)], axis=-1)
    return dict(centers_2d=c2d, opens_2d=opens, thetas_rad=theta, gammas_rad=gamma,
                betas_rad=beta, widths_2d=width, heights_2d=height, scores_from_6d=rect[:, 5],
                object_ids=np.round(rect[:, 6]).astype(np.int32), center_z_depths=zmm)


def visibility(arrays: Dict[str, np.ndarray], raw: dict, cloud_draw: Optional[np.ndarray]
               ) -> np.ndarray:
    """rect2grasp's centres (float32 pixels minus the float32 principal point) against the
    drawn depth points."""
    k, c = raw['intrinsics'], raw['cloud_intrinsics']
    px = arrays['centers_2d'].astype(np.float32)
    z = arrays['center_z_depths'] / 1000
    centres = np.stack([z / k[0, 0] * (px[:, 0] - np.float32(k[0, 2])),
                        z / k[1, 1] * (px[:, 1] - np.float32(k[1, 2])), z], axis=-1)
    h, w = raw['depth'].shape
    xmap, ymap = np.meshgrid(np.arange(w), np.arange(h))
    zz = raw['depth'] / raw['factor']
    cloud = np.stack([(xmap - c[0, 2]) / c[0, 0] * zz, (ymap - c[1, 2]) / c[1, 1] * zz, zz],
                     axis=-1)[zz > 0]
    if cloud_draw is not None:
        cloud = cloud[cloud_draw]
    return np.array([np.linalg.norm(t - cloud, axis=-1).min() < 0.01 for t in centres], bool)


def reference_grasps(raw: dict, draws: dict, max_mu: float = 0.2, mu_dtype=np.float32,
                     approach_sign: float = 1.0,
                     width_range: Tuple[float, float] = (0.03, 0.15),
                     depth_range: Tuple[float, float] = (0.015, 0.025), refined: bool = True,
                     max_grasps: int = 5000) -> np.ndarray:
    """The grasps that enter NMS, given the draws (``model_points``, ``subsample`` index
    arrays; a missing one: no subsample)."""
    g = load_grasp_6d(raw, max_mu, mu_dtype)
    keep = ((approach_sign * g[:, 10] > 0) & (g[:, 1] > width_range[0])
            & (g[:, 1] < width_range[1]) & (g[:, 3] > depth_range[0]) & (g[:, 3] < depth_range[1]))
    g = g[keep]
    if len(g) > max_grasps:
        g = g[draws['subsample']]
    models = np.concatenate([_homogeneous(o['model'], o['pose']) for o in raw['objects']])
    if draws.get('model_points') is not None:
        models = models[draws['model_points']]
    return refine(g, models) if refined else g


def reference_arrays(grasps: np.ndarray, raw: dict, draws: dict,
                     nms: Tuple[float, float] = (0.02, 60 * np.pi / 180),
                     image_size: Optional[Tuple[int, int]] = None,
                     apply_visibility: bool = False) -> Dict[str, np.ndarray]:
    """NMS, the rectangles and the masks (``draws['cloud']``: the visibility draw)."""
    arrays = rectangles(greedy_nms(grasps, *nms), raw['intrinsics'])
    size = image_size or raw['image_size']
    c = arrays['centers_2d']
    valid = (c.min(axis=1) > 0) & (c[:, 0] < size[0]) & (c[:, 1] < size[1])
    if apply_visibility:
        valid &= visibility(arrays, raw, draws.get('cloud'))
    return {name: arrays[name][valid] for name in FIELDS}


def reference_frame(raw: dict, draws: dict, nms: Tuple[float, float] = (0.02, 60 * np.pi / 180),
                    image_size: Optional[Tuple[int, int]] = None, apply_visibility: bool = False,
                    **rules) -> Dict[str, np.ndarray]:
    """The saved arrays of one frame; ``rules``: :func:`reference_grasps`' mutations."""
    return reference_arrays(reference_grasps(raw, draws, **rules), raw, draws, nms, image_size,
                            apply_visibility)


def mismatches(expected: Dict[str, np.ndarray], actual: Dict[str, np.ndarray]) -> List[str]:
    """Fields whose dtype, shape or any value differ (bit for bit)."""
    return [name for name in FIELDS
            if expected[name].dtype != actual[name].dtype
            or expected[name].shape != actual[name].shape
            or not np.array_equal(expected[name], actual[name])]
