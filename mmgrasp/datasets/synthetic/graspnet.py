"""Synthetic GraspNet-1Billion-style dataset writer.

Real GraspNet data is ~100 GB and cannot be shipped with tests, so this module writes a small,
deterministic dataset in exactly the real on-disk layout (scenes/, grasp_label/, collision_label/,
tolerance/, models/), including what graspnetAPI's evaluation reads: ``annotations/%04d.xml`` per
frame (poses model -> current camera, equal to the meta poses), test-split scenes (ids 100-189,
``test_scenes``), and per model a dense ``nontextured.ply`` (2.5 mm surface grid), the box mesh
``textured.obj`` and a dexnet ``textured.sdf`` (``box_sdf_grid``). Objects are boxes of 3-8 cm
resting on a finite table; depth and segmentation are ray-cast exactly, so geometry checks
(back-projection, poses, workspace masks) hold to the millimetre. With ``shapes`` the models
are also spheres, upright cylinders, capsules, tori and L-shaped plates (``synthetic_shapes``):
sphere-traced on their exact signed distance, labelled by ``synthetic_labels.shape_grasp_labels``,
their PLY files ASCII or binary (``ply_formats``).

Grasp labels follow the evaluator's physics (``synthetic_labels``): analytic jaw contacts on the
box, dexnet's antipodal force-closure test for μ on the 0.1 grid, graspnetAPI's gripper against
the box (self-collision) and against the other boxes and the table (scene collision). On the
real 300x12x4 grid (12 models of 300 points, seed 0) 97.6 % of cells are infeasible (μ = -1;
96.9-99.0 % per model; real labels: 93-98 %); about half of the feasible cells are free of
self-collision; μ covers all ten values (shares 0.1: 6 %, 0.3: 16 %, 0.6: 14 %, 1.0: 4 %);
feasible widths are at most 0.1 m (wider chords are infeasible, their widths are kept; with
``max_label_width`` above 0.1, wider chords keep their μ as in the real labels); 1-2 %
of tolerance cells are non-zero, up to 0.03-0.05 m.

Every random draw comes from ``np.random.default_rng((seed, purpose, *index))`` so each scene,
object or frame is generated independently and the output is byte-identical for the same
arguments.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cv2
import numpy as np
import scipy.io

from mmgrasp.geometry import voxel_downsample
from .synthetic_labels import (MAX_WIDTH, box_grasp_labels, box_self_collision, points_collision,
                               scene_collision, shape_grasp_labels, tolerance_labels)
from .synthetic_shapes import SHAPES, Shape, make_shape

__all__ = ['write_synthetic_dataset', 'render', 'camera_intrinsics', 'model_half_extents',
           'box_surface_grid', 'box_signed_distance', 'box_sdf_grid', 'MU_VALUES',
           'TOLERANCE_RADII', 'RS_WRT_KN', 'MAX_MODELS', 'TEST_SPLITS', 'SHAPES',
           'PLY_FORMATS']

MAX_MODELS = 88
FACTOR_DEPTH = 1000.0
MAX_DEPTH = 2.0  # metres; farther readings are written as 0 (no reading)
TABLE_HALF = 0.5  # the table is a 1 m x 1 m square so far pixels read 0
#: The ten feasible friction coefficients (a 0.1 grid); infeasible cells hold exactly -1.
MU_VALUES = np.array([np.float32(np.round(k * 0.1, 1)) for k in range(1, 11)], np.float32)
#: Tolerance radii used by graspnet-baseline's generate_tolerance_label.py (0 ... 0.050 m).
TOLERANCE_RADII = np.float32(np.round(np.arange(51) * 0.001, 3))
_INTRINSICS_1280x720 = {  # fx, fy, cx, cy
    'realsense': (927.17, 927.37, 651.32, 349.62),
    'kinect': (631.55, 631.21, 638.43, 366.50),
}
_CAMERA_CODE = {'realsense': 0, 'kinect': 1}
PLY_SPACING = 0.0025  # nontextured.ply surface grid (graspnetAPI voxel-downsamples it at 8 mm)
SDF_RESOLUTION = 0.002  # textured.sdf grid
SDF_PADDING = 0.012  # grid margin around the box
SDF_CURVATURE = 0.5  # 1/m, see box_sdf_grid
#: Scene ids of the test splits (graspnet.md §1): seen, similar, novel.
TEST_SPLITS = {'test_seen': range(100, 130), 'test_similar': range(130, 160),
               'test_novel': range(160, 190)}
PLY_FORMATS = ('ascii', 'binary')
EVAL_VOXEL = 0.008  # graspnetAPI samples the model points at 8 mm
_MAT_HEADER = b'MATLAB 5.0 MAT-file, Platform: posix, written by mmgrasp.datasets.synthetic'


def _rot(axis: int, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    r = np.eye(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def _rigid(r: np.ndarray, t: Sequence[float]) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = r, t
    return m


#: Fixed RealSense pose in the Kinect frame (both cameras ride on the same arm).
RS_WRT_KN = _rigid(_rot(0, np.deg2rad(2.0)) @ _rot(1, np.deg2rad(-3.0)), (0.06, -0.02, 0.01))


def _rng(seed: int, purpose: str, *index: int) -> np.random.Generator:
    """Independent stream per (seed, purpose, index): regenerating one item never shifts another."""
    return np.random.default_rng([seed, zlib.crc32(purpose.encode()), *index])


def camera_intrinsics(camera: str, image_size: tuple[int, int] = (1280, 720)) -> np.ndarray:
    """3x3 GraspNet intrinsics of ``camera``, rescaled from 1280x720 to ``image_size`` (W, H)."""
    if camera not in _INTRINSICS_1280x720:
        raise ValueError(f'unknown camera {camera!r}; expected one of '
                         f'{sorted(_INTRINSICS_1280x720)}')
    fx, fy, cx, cy = _INTRINSICS_1280x720[camera]
    sx, sy = image_size[0] / 1280.0, image_size[1] / 720.0
    return np.array([[fx * sx, 0, cx * sx], [0, fy * sy, cy * sy], [0, 0, 1]], np.float64)


def model_half_extents(seed: int, model_id: int) -> np.ndarray:
    """Half-extents (3,) in metres of box model ``model_id``; the model frame is the box centre."""
    return _rng(seed, 'model-size', model_id).uniform(0.015, 0.04, 3)


def _surface_points(rng: np.random.Generator, half: np.ndarray, n: int) -> np.ndarray:
    """Uniform samples on the box surface: faces chosen by area, then uniform on the face."""
    areas = np.array([half[1] * half[2], half[0] * half[2], half[0] * half[1]])
    axis = rng.choice(3, size=n, p=areas / areas.sum())
    pts = rng.uniform(-half, half, size=(n, 3))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    pts[np.arange(n), axis] = sign * half[axis]
    return pts.astype(np.float32)


class _Model(NamedTuple):
    half: np.ndarray  # (3,) f64, bounding box half-extents
    points: np.ndarray  # (Np, 3) f32, model frame
    shape: Shape | None  # None: a box


def _make_model(seed: int, model_id: int, points_per_object: int, kind: str = 'box') -> _Model:
    rng = _rng(seed, 'model-points', model_id)
    n = points_per_object
    if kind == 'box':
        half = model_half_extents(seed, model_id)
        num = max(1, int(rng.integers(int(0.9 * n), int(1.1 * n) + 1)))
        return _Model(half, _surface_points(rng, half, num), None)
    shape = make_shape(kind, _rng(seed, 'model-size', model_id))
    num = max(1, int(rng.integers(int(0.9 * n), int(1.1 * n) + 1)))
    dense = shape.surface_points(0.001)
    points = dense[rng.choice(len(dense), min(num, len(dense)), replace=False)]
    return _Model(shape.half, points.astype(np.float32), shape)


def _surface(model: _Model) -> np.ndarray:
    """The dense surface points written to ``nontextured.ply``."""
    return box_surface_grid(model.half) if model.shape is None else \
        model.shape.surface_points(PLY_SPACING)


def _eval_points(model: _Model) -> np.ndarray:
    """The model points as the evaluator samples them (8 mm voxels of the PLY's points)."""
    return voxel_downsample(_surface(model), EVAL_VOXEL)


def _grasp_arrays(model: _Model, grid: tuple[int, int, int], max_width: float):
    """Label grids of one model from the evaluator's physics (``synthetic_labels``)."""
    v, a, d = grid
    if model.shape is None:
        mu, width = box_grasp_labels(model.half, model.points, grid, max_width)
        collision = box_self_collision(model.half, model.points, mu, width, grid)
    else:
        mu, width = shape_grasp_labels(model.shape, model.points, grid, max_width)
        collision = points_collision(mu, width, model.points, grid, _eval_points(model))
    offsets = np.empty((len(model.points), v, a, d, 3), np.float32)
    offsets[..., 0] = (np.arange(a) * np.pi / 12).astype(np.float32)[:, None]
    offsets[..., 1] = (np.arange(1, d + 1) * 0.01).astype(np.float32)
    offsets[..., 2] = width
    return offsets, collision, mu, width


def _box_corners(half: np.ndarray) -> np.ndarray:
    return np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half


_BOX_FACES = [(0, 3, 2), (0, 1, 3), (4, 7, 5), (4, 6, 7), (0, 5, 1), (0, 4, 5),  # outward normals
              (2, 7, 6), (2, 3, 7), (0, 6, 4), (0, 2, 6), (1, 7, 3), (1, 5, 7)]


def box_surface_grid(half: np.ndarray, spacing: float = PLY_SPACING) -> np.ndarray:
    """Regular grid points (N, 3) on the box surface, at most ``spacing`` apart, edges included."""
    axes = [np.linspace(-h, h, int(np.ceil(2 * h / spacing)) + 1) for h in half]
    grid = np.stack(np.meshgrid(*axes, indexing='ij'), -1)
    on_surface = np.zeros(grid.shape[:3], bool)
    for k, ax in enumerate(axes):
        sl = [slice(None)] * 3
        sl[k] = [0, len(ax) - 1]
        on_surface[tuple(sl)] = True
    return grid[on_surface]


def _model_ply(model: _Model, fmt: str = 'ascii') -> bytes:
    """Dense surface points as real models have (graspnetAPI reads vertices, downsamples at 8 mm):
    ASCII with 6 decimals, or binary little-endian float32."""
    pts = _surface(model)
    head = ['ply', f'format {"ascii" if fmt == "ascii" else "binary_little_endian"} 1.0',
            f'element vertex {len(pts)}', 'property float x', 'property float y',
            'property float z', 'end_header']
    if fmt == 'ascii':
        return ('\n'.join(head + [f'{x:.6f} {y:.6f} {z:.6f}' for x, y, z in pts]) + '\n').encode()
    return ('\n'.join(head) + '\n').encode() + pts.astype('<f4').tobytes()


def _model_obj(model: _Model) -> bytes:
    """The mesh dexnet loads with the SDF (``textured.obj``)."""
    if model.shape is None:
        verts, faces = _box_corners(model.half), _BOX_FACES
    else:
        verts, faces = model.shape.mesh()
    lines = [f'v {x:.6f} {y:.6f} {z:.6f}' for x, y, z in verts]
    lines += [f'f {i + 1} {j + 1} {k + 1}' for i, j, k in faces]
    return ('\n'.join(lines) + '\n').encode()


def box_signed_distance(half: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Exact signed distance to the box (negative inside) of points (..., 3)."""
    q = np.abs(pts) - half
    outside = np.linalg.norm(np.maximum(q, 0), axis=-1)
    return outside + np.minimum(q.max(-1), 0)


def box_sdf_grid(half: np.ndarray, signed_distance=None):
    """(values (nx, ny, nz), origin (3,), resolution) of the SDF written to ``textured.sdf``.

    The values are s * (1 + SDF_CURVATURE * (x + y + z)) with s the exact signed distance: the same
    zero set (the box) and, through dexnet's plane fit, the same face normals, but curved along
    every jaw line that is not parallel to a face. An exact box SDF is linear through each face,
    and dexnet's quadratic zero-crossing search (``find_zero_crossing_quadratic``) rejects a zero
    leading coefficient, so it would find no contact at all. Trilinear interpolation reproduces
    s * (x + y + z) exactly near a face up to a term of order SDF_CURVATURE * resolution^2 (3 um).
    ``signed_distance`` (points -> distances) replaces the box's for curved shapes (``half``:
    their bounding box); their flat faces (caps, the L's sides) need the same factor.
    """
    res = SDF_RESOLUTION
    cells = np.ceil((np.asarray(half) + SDF_PADDING) / res).astype(int)
    origin = -cells * res
    axes = [origin[k] + res * np.arange(2 * cells[k] + 1) for k in range(3)]
    pts = np.stack(np.meshgrid(*axes, indexing='ij'), -1)
    exact = box_signed_distance(half, pts) if signed_distance is None else signed_distance(pts)
    values = exact * (1 + SDF_CURVATURE * pts.sum(-1))
    return values, origin, res


def _model_sdf(model: _Model) -> bytes:
    """dexnet's SDF text format: dims, origin, resolution, then values with x fastest."""
    values, origin, res = box_sdf_grid(model.half, None if model.shape is None
                                       else model.shape.sdf)
    head = [' '.join(str(n) for n in values.shape), ' '.join(f'{o:.6f}' for o in origin),
            f'{res:.6f}']
    body = np.char.mod('%.8f', values.transpose(2, 1, 0).reshape(-1))
    return ('\n'.join(head + body.tolist()) + '\n').encode()


def _quaternion(r: np.ndarray) -> np.ndarray:
    """w x y z unit quaternion (w >= 0) of a rotation matrix."""
    w = np.sqrt(max(0.0, 1 + np.trace(r))) / 2
    x = np.sqrt(max(0.0, 1 + r[0, 0] - r[1, 1] - r[2, 2])) / 2
    y = np.sqrt(max(0.0, 1 - r[0, 0] + r[1, 1] - r[2, 2])) / 2
    z = np.sqrt(max(0.0, 1 - r[0, 0] - r[1, 1] + r[2, 2])) / 2
    x = np.copysign(x, r[2, 1] - r[1, 2])
    y = np.copysign(y, r[0, 2] - r[2, 0])
    z = np.copysign(z, r[1, 0] - r[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def _annotation_xml(ids: Sequence[int], poses: Sequence[np.ndarray],
                    kinds: Sequence[str] | None = None) -> str:
    """``annotations/%04d.xml`` as graspnetAPI's xmlWriter lays it out (children read by position:
    obj_id, obj_name, obj_path, pos_in_world, ori_in_world as w x y z); poses model -> camera."""
    lines = ['<?xml version="1.0" ?>', '<scene>']
    for obj_id, pose, kind in zip(ids, poses, kinds or ['box'] * len(ids)):
        t, q = pose[:3, 3], _quaternion(pose[:3, :3])
        lines += ['    <obj>', f'        <obj_id>{obj_id}</obj_id>',
                  f'        <obj_name>{kind}_{obj_id:03d}</obj_name>',
                  f'        <obj_path>models/{obj_id:03d}/textured.obj</obj_path>',
                  f'        <pos_in_world>{t[0]:.8f} {t[1]:.8f} {t[2]:.8f}</pos_in_world>',
                  f'        <ori_in_world>{q[0]:.8f} {q[1]:.8f} {q[2]:.8f} {q[3]:.8f}'
                  '</ori_in_world>', '    </obj>']
    return '\n'.join(lines + ['</scene>']) + '\n'


def _obb_overlap(c1, yaw1, h1, c2, yaw2, h2) -> bool:
    """2-D separating-axis test for two yawed rectangles (centre, yaw, half sizes)."""
    ax1, ax2 = _rot(2, yaw1)[:2, :2].T, _rot(2, yaw2)[:2, :2].T  # rows = rectangle axes
    delta = np.asarray(c2) - np.asarray(c1)
    return all(abs(delta @ ax) <= np.abs(ax1 @ ax) @ h1 + np.abs(ax2 @ ax) @ h2
               for ax in np.concatenate([ax1, ax2]))


def _place_objects(rng: np.random.Generator, halves: list[np.ndarray]) -> list[np.ndarray]:
    """Table-frame poses of boxes resting on z=0, reject-sampled so footprints keep a 5 mm gap.

    The sampling square starts at +-0.15 m and grows slowly when crowded scenes keep failing.
    """
    placed: list[tuple[np.ndarray, float, np.ndarray]] = []
    poses = []
    extent, failures = 0.15, 0
    for half in halves:
        foot = half[:2] + 0.0025
        while True:
            yaw = rng.uniform(-np.pi, np.pi)
            xy = rng.uniform(-extent, extent, 2)
            if not any(_obb_overlap(xy, yaw, foot, c, y, h) for c, y, h in placed):
                break
            failures += 1
            if failures % 100 == 0:
                extent = min(extent * 1.05, 0.4)
            if failures > 20000:
                raise RuntimeError('could not place the objects without overlap')
        placed.append((xy, yaw, foot))
        poses.append(_rigid(_rot(2, yaw), (xy[0], xy[1], half[2])))
    return poses


def _look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """OpenCV camera (x right, y down, z forward) pose at ``eye`` looking at ``target``."""
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    return _rigid(np.stack([x, np.cross(z, x), z], axis=1), eye)


def render(K: np.ndarray, image_size: tuple[int, int], cam_wrt_table: np.ndarray,
           obj_wrt_table: Sequence[np.ndarray], halves: Sequence[np.ndarray],
           labels: Sequence[int], shapes: Sequence[Shape | None] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ray casting of the table square and boxes (slab test); ``shapes`` (None entries
    are boxes of ``halves``) are sphere-traced on their exact signed distance.

    Returns (z (H,W) f64 metres, inf where nothing is hit; seg (H,W) uint8; table-hit mask). The
    ray of pixel (u, v) has camera direction ((u-cx)/fx, (v-cy)/fy, 1), so the ray parameter is
    the depth z and back-projection as in graspnet-baseline inverts it exactly.
    """
    w, h = image_size
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    dx = (np.arange(w) - cx) / fx
    dy = (np.arange(h) - cy) / fy
    zbuf = np.full((h, w), np.inf)
    seg = np.zeros((h, w), np.uint8)
    rot, c = cam_wrt_table[:3, :3], cam_wrt_table[:3, 3]
    with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
        dz = rot[2, 0] * dx[None, :] + rot[2, 1] * dy[:, None] + rot[2, 2]
        t = -c[2] / dz
        px = c[0] + t * (rot[0, 0] * dx[None, :] + rot[0, 1] * dy[:, None] + rot[0, 2])
        py = c[1] + t * (rot[1, 0] * dx[None, :] + rot[1, 1] * dy[:, None] + rot[1, 2])
        table = (t > 0) & (np.abs(px) <= TABLE_HALF) & (np.abs(py) <= TABLE_HALF)
        zbuf[table] = t[table]
        table_cam = np.linalg.inv(cam_wrt_table)
        for pose, half, lab, shape in zip(obj_wrt_table, halves, labels,
                                          shapes or [None] * len(halves)):
            m = table_cam @ pose  # model -> camera
            corners = _box_corners(half) @ m[:3, :3].T + m[:3, 3]
            if corners[:, 2].min() > 1e-3:  # clip the work to the projected bounding box
                us = fx * corners[:, 0] / corners[:, 2] + cx
                vs = fy * corners[:, 1] / corners[:, 2] + cy
                u0, u1 = max(int(np.floor(us.min())) - 1, 0), min(int(np.ceil(us.max())) + 2, w)
                v0, v1 = max(int(np.floor(vs.min())) - 1, 0), min(int(np.ceil(vs.max())) + 2, h)
            else:
                u0, u1, v0, v1 = 0, w, 0, h
            if u0 >= u1 or v0 >= v1:
                continue
            r = m[:3, :3]
            origin = -r.T @ m[:3, 3]  # camera centre in the model frame
            sub_dx, sub_dy = dx[None, u0:u1], dy[v0:v1, None]
            zsub = zbuf[v0:v1, u0:u1]
            if shape is not None:
                dirs = np.stack(np.broadcast_arrays(
                    *[r[0, k] * sub_dx + r[1, k] * sub_dy + r[2, k] for k in range(3)]), -1)
                tnear = shape.ray_depths(origin, dirs)
                hit = np.isfinite(tnear) & (tnear > 0) & (tnear < zsub)
                zsub[hit] = tnear[hit]
                seg[v0:v1, u0:u1][hit] = lab
                continue
            tnear = np.full((v1 - v0, u1 - u0), -np.inf)
            tfar = np.full((v1 - v0, u1 - u0), np.inf)
            for k in range(3):  # slab test in the model frame
                dk = r[0, k] * sub_dx + r[1, k] * sub_dy + r[2, k]
                t1 = (-half[k] - origin[k]) / dk
                t2 = (half[k] - origin[k]) / dk
                tnear = np.maximum(tnear, np.minimum(t1, t2))
                tfar = np.minimum(tfar, np.maximum(t1, t2))
            hit = (tnear <= tfar) & (tnear > 0) & (tnear < zsub)
            zsub[hit] = tnear[hit]
            seg[v0:v1, u0:u1][hit] = lab
    table &= seg == 0
    return zbuf, seg, table


def _kind(model: _Model) -> str:
    return 'box' if model.shape is None else model.shape.kind


def _posed(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    return points @ pose[:3, :3].T + pose[:3, 3]


def _savemat_bytes(mdict: dict) -> bytes:
    """scipy stamps the creation time into the header; a fixed header keeps files reproducible."""
    buf = io.BytesIO()
    scipy.io.savemat(buf, mdict)
    data = bytearray(buf.getvalue())
    data[:116] = _MAT_HEADER.ljust(116, b' ')
    return bytes(data)


def _write_png(path: str, image: np.ndarray) -> None:
    ok, buf = cv2.imencode('.png', image)
    if not ok:
        raise OSError(f'could not encode {path}')
    with open(path, 'wb') as f:
        f.write(buf.tobytes())


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _write_scene(root: str, seed: int, scene: int, ids: list[int], models: dict[int, _Model],
                 labels: dict, frames: int, grid: tuple[int, int, int],
                 image_size: tuple[int, int], cameras: Sequence[str], palette: np.ndarray) -> None:
    rng = _rng(seed, 'scene', scene)
    halves = [models[i].half for i in ids]
    obj_wrt_table = _place_objects(rng, halves)
    sdir = os.path.join(root, 'scenes', f'scene_{scene:04d}')
    os.makedirs(sdir)
    with open(os.path.join(sdir, 'object_id_list.txt'), 'w') as f:
        f.write(''.join(f'{i}\n' for i in ids))
    np.save(os.path.join(sdir, 'rs_wrt_kn.npy'), RS_WRT_KN)

    # Kinect frame-0 pose: 0.5-0.7 m above the table, tilted 50-70 deg; RealSense rides along.
    height = rng.uniform(0.5, 0.7)
    elev = np.deg2rad(rng.uniform(50, 70))
    azim = rng.uniform(-np.pi, np.pi)
    eye = np.array([np.cos(azim), np.sin(azim), 0.0]) * height / np.tan(elev)
    eye[2] = height
    kn0 = _look_at(eye, np.array([*rng.uniform(-0.03, 0.03, 2), 0.03]))
    step = np.deg2rad(min(3.0, 90.0 / max(frames - 1, 1))) * (1 if rng.random() < 0.5 else -1)
    arc = [_rigid(_rot(2, f * step), (0, 0, 0)) for f in range(frames)]  # about the table z axis

    cls_indexes = np.array([[i + 1 for i in ids]], np.int64)
    for cam in cameras:
        cam0 = kn0 if cam == 'kinect' else kn0 @ RS_WRT_KN
        cam0_inv = np.linalg.inv(cam0)
        camera_poses = np.stack([cam0_inv @ a @ cam0 for a in arc])
        K = camera_intrinsics(cam, image_size)
        cdir = os.path.join(sdir, cam)
        for sub in ('rgb', 'depth', 'label', 'meta', 'annotations'):
            os.makedirs(os.path.join(cdir, sub))
        np.save(os.path.join(cdir, 'camK.npy'), K)
        np.save(os.path.join(cdir, 'camera_poses.npy'), camera_poses)
        np.save(os.path.join(cdir, 'cam0_wrt_table.npy'), cam0)
        for f in range(frames):
            cam_wrt_table = cam0 @ camera_poses[f]
            z, seg, table = render(K, image_size, cam_wrt_table, obj_wrt_table, halves,
                                   [i + 1 for i in ids], [models[i].shape for i in ids])
            valid = z <= MAX_DEPTH
            depth = np.round(np.where(valid, z, 0) * FACTOR_DEPTH).astype(np.int32)
            noise_rng = _rng(seed, 'depth-noise', scene, _CAMERA_CODE[cam], f)
            noise = noise_rng.integers(-1, 2, depth.shape)
            depth = np.where(table & valid, np.maximum(depth + noise, 1), depth).astype(np.uint16)
            seg[~valid] = 0
            shade = np.clip(1.25 - 0.5 * np.where(valid, z, 2.0), 0.3, 1.0)[..., None]
            colour = np.where((table & valid)[..., None], palette[-1], palette[seg])
            rgb = np.where(valid[..., None], colour * shade, 0).astype(np.uint8)
            name = f'{f:04d}'
            _write_png(os.path.join(cdir, 'rgb', name + '.png'), rgb)
            _write_png(os.path.join(cdir, 'depth', name + '.png'), depth)
            _write_png(os.path.join(cdir, 'label', name + '.png'), seg)
            cam_inv = np.linalg.inv(cam_wrt_table)
            poses = np.stack([(cam_inv @ p)[:3] for p in obj_wrt_table], axis=2).astype(np.float32)
            with open(os.path.join(cdir, 'annotations', name + '.xml'), 'w') as fh:
                fh.write(_annotation_xml(ids, [cam_inv @ p for p in obj_wrt_table],
                                         [_kind(models[i]) for i in ids]))
            meta = {'poses': poses, 'cls_indexes': cls_indexes, 'intrinsic_matrix': K,
                    'factor_depth': np.array([[FACTOR_DEPTH]], np.float64)}
            with open(os.path.join(cdir, 'meta', name + '.mat'), 'wb') as fh:
                fh.write(_savemat_bytes(meta))

    # Scene collisions: the same gripper against the other objects and the table
    # (synthetic_labels): boxes against boxes in closed form, curved shapes by their points.
    arrays = []
    for n, (mid, pose) in enumerate(zip(ids, obj_wrt_table)):
        model, (mu, width, own) = models[mid], labels[mid]
        others = [(models[m], p) for k, (m, p) in enumerate(zip(ids, obj_wrt_table)) if k != n]
        inv = np.linalg.inv(pose)
        curved = [_posed(_eval_points(o), inv @ p) for o, p in others
                  if model.shape is not None or o.shape is not None]
        obstacles = np.concatenate(curved) if curved else np.zeros((0, 3))
        if model.shape is None:
            boxes = [(o.half, p) for o, p in others if o.shape is None]
            collision = scene_collision(own, mu, width, model.points, grid, pose, boxes)
            if len(obstacles):
                collision = points_collision(mu, width, model.points, grid, obstacles,
                                             skip=collision)
        else:
            collision = points_collision(mu, width, model.points, grid, obstacles,
                                         table_pose=pose, skip=own)
        arrays.append(collision)
    cdir = os.path.join(root, 'collision_label', f'scene_{scene:04d}')
    os.makedirs(cdir)
    np.savez(os.path.join(cdir, 'collision_labels.npz'), *arrays)


@contextlib.contextmanager
def staged_dataset(out: str) -> Iterator[str]:
    """A fresh folder ``out + '.tmp-<pid>'`` to write a dataset into, renamed to ``out`` when the
    block ends and removed if it raises: ``out`` is never half-written. ``out`` must be missing
    or an empty directory."""
    if os.path.lexists(out) and not (os.path.isdir(out) and not os.listdir(out)):
        raise FileExistsError(f'refusing to write the synthetic dataset: {out!r} exists and is not '
                              'an empty directory')
    tmp = f'{out}.tmp-{os.getpid()}'
    if os.path.lexists(tmp):
        shutil.rmtree(tmp)
    try:
        os.makedirs(tmp)
        yield tmp
        if os.path.isdir(out):
            os.rmdir(out)  # empty (checked above); rename cannot replace it on every platform
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_synthetic_dataset(out: str | os.PathLike, scenes: int = 4, frames: int = 4,
                            objects: int = 10, models: int | None = None,
                            points_per_object: int = 2000,
                            grid: tuple[int, int, int] = (300, 12, 4),
                            image_size: tuple[int, int] = (1280, 720),
                            cameras: Sequence[str] = ('realsense', 'kinect'),
                            duplicates: int = 0, seed: int = 0, progress: bool = True,
                            test_scenes: Sequence[int] = (),
                            max_label_width: float = MAX_WIDTH,
                            shapes: Sequence[str] = ('box', ),
                            ply_formats: Sequence[str] = ('ascii', )) -> None:
    """Write a deterministic GraspNet-1Billion-layout dataset to ``out``.

    Training scenes get ids ``0..scenes-1``; ``test_scenes`` adds scenes with those ids (100-189:
    seen 100-129, similar 130-159, novel 160-189), written the same way, for the evaluator.
    ``objects`` instances per scene are drawn from model ids ``0..models-1`` (default
    ``objects + 2``); label files are written for every model id. With ``duplicates=K`` the first
    K scenes contain one model twice (``objects`` instances in total). Everything is written to
    ``out + '.tmp-<pid>'`` and renamed at the end, so ``out`` is never half-written.
    ``max_label_width`` above the gripper's 0.1 m keeps μ for wider chords, as the real labels
    do, so that the recipes' width mask has cells to act on (the tests use it).
    Model ``m`` is a ``shapes[m % len(shapes)]`` (``SHAPES``: box, sphere, cylinder, capsule,
    torus, lshape; see ``synthetic_shapes``) and its ``nontextured.ply`` is written in
    ``ply_formats[m % len(ply_formats)]`` (``ascii`` or ``binary``, little-endian float32).
    """
    out = os.path.normpath(os.fspath(out))
    models = objects + 2 if models is None else models
    grid, image_size, cameras = tuple(map(int, grid)), tuple(map(int, image_size)), list(cameras)
    if not 1 <= objects <= models <= MAX_MODELS or (duplicates and objects < 2):
        raise ValueError(f'need 1 <= objects <= models <= {MAX_MODELS} (and objects >= 2 with '
                         f'duplicates), got objects={objects}, models={models}')
    if min(scenes, frames, points_per_object) < 1 or not 0 <= duplicates <= scenes or seed < 0:
        raise ValueError('need scenes, frames, points_per_object >= 1, 0 <= duplicates <= scenes '
                         'and seed >= 0')
    test_scenes = [int(s) for s in test_scenes]
    if scenes > 100 or len(set(test_scenes)) != len(test_scenes) or \
            not all(100 <= s < 190 for s in test_scenes):
        raise ValueError(f'need scenes <= 100 (training ids 0-99) and distinct test_scenes in '
                         f'100-189, got scenes={scenes}, test_scenes={test_scenes}')
    if len(grid) != 3 or min(grid) < 1 or len(image_size) != 2 or min(image_size) < 1:
        raise ValueError(f'bad grid {grid} or image_size {image_size}')
    if not cameras or len(set(cameras)) != len(cameras):
        raise ValueError(f'cameras must be a non-empty list without repeats, got {cameras}')
    for cam in cameras:
        camera_intrinsics(cam)  # validates the name
    shapes, ply_formats = list(shapes), list(ply_formats)
    if not shapes or not set(shapes) <= set(SHAPES) or not ply_formats or \
            not set(ply_formats) <= set(PLY_FORMATS):
        raise ValueError(f'shapes must be a non-empty list of {SHAPES} and ply_formats of '
                         f'{PLY_FORMATS}, got {shapes} and {ply_formats}')
    with staged_dataset(out) as tmp:
        model_set = {m: _make_model(seed, m, points_per_object, shapes[m % len(shapes)])
                     for m in range(models)}
        for sub in ('scenes', 'grasp_label', 'collision_label', 'tolerance', 'models'):
            os.makedirs(os.path.join(tmp, sub))
        labels = {}
        for m, model in model_set.items():
            _log(progress, f'[synthetic] object {m:03d} ({_kind(model)}): {len(model.points)} '
                           f'points, grid {grid}')
            mdir = os.path.join(tmp, 'models', f'{m:03d}')
            os.makedirs(mdir)
            files = (('nontextured.ply', _model_ply(model, ply_formats[m % len(ply_formats)])),
                     ('textured.obj', _model_obj(model)), ('textured.sdf', _model_sdf(model)))
            for name, data in files:
                with open(os.path.join(mdir, name), 'wb') as f:
                    f.write(data)
            offsets, collision, scores, width = _grasp_arrays(model, grid, max_label_width)
            np.savez(os.path.join(tmp, 'grasp_label', f'{m:03d}_labels.npz'), points=model.points,
                     offsets=offsets, collision=collision, scores=scores)
            del offsets
            np.save(os.path.join(tmp, 'tolerance', f'{m:03d}_tolerance.npy'),
                    tolerance_labels(model.points, scores))
            labels[m] = (scores, width, collision)
        palette = _rng(seed, 'palette').integers(40, 256, (MAX_MODELS + 2, 3)).astype(np.float64)
        palette[-1] = (170, 160, 150)  # table
        for s in [*range(scenes), *test_scenes]:
            rng = _rng(seed, 'scene-objects', s)
            if s < duplicates:
                ids = list(rng.choice(models, objects - 1, replace=False))
                ids.insert(int(rng.integers(0, objects)), ids[int(rng.integers(0, objects - 1))])
            else:
                ids = list(rng.choice(models, objects, replace=False))
            ids = [int(i) for i in ids]
            _log(progress, f'[synthetic] scene {s:04d}: objects {ids}, {frames} frames x {cameras}')
            _write_scene(tmp, seed, s, ids, model_set, labels, frames, grid, image_size, cameras,
                         palette)
    _log(progress, f'[synthetic] wrote {out}')
