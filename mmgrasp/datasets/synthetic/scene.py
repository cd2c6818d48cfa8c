"""What both synthetic writers (GraspNet-1Billion's layout, :mod:`.graspnet`; GraspClutter6D's,
:mod:`.gc6d`) share: seeded streams, rigid transforms, object models and their files, placement
on the table, ray-cast rendering, and the staged output folder."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cv2
import numpy as np

from mmgrasp.geometry import voxel_downsample
from mmgrasp.geometry.portable import (cos, dot, matmul, matvec, norm, rigid_inverse, sin,
                                       transform)

from .boxes import (BOX_FACES, PLY_SPACING, box_corners, box_sdf_grid, box_surface_grid,
                    box_surface_points)
from .labels import box_grasp_labels, box_self_collision, points_collision, shape_grasp_labels
from .shapes import Shape, make_shape

MAX_DEPTH = 2.0  # metres; farther readings are written as 0 (no reading)
TABLE_HALF = 0.5  # the table is a 1 m x 1 m square so far pixels read 0
_INTRINSICS_1280x720 = {  # fx, fy, cx, cy
    'realsense': (927.17, 927.37, 651.32, 349.62),
    'kinect': (631.55, 631.21, 638.43, 366.50),
}
EVAL_VOXEL = 0.008  # graspnetAPI samples the model points at 8 mm


def axis_rotation(axis: int, angle: float) -> np.ndarray:
    c, s = cos(angle), sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    r = np.eye(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def rigid_transform(r: np.ndarray, t: Sequence[float]) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = r, t
    return m


def item_rng(seed: int, purpose: str, *index: int) -> np.random.Generator:
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
    return item_rng(seed, 'model-size', model_id).uniform(0.015, 0.04, 3)


class SyntheticModel(NamedTuple):
    half: np.ndarray  # (3,) f64, bounding box half-extents
    points: np.ndarray  # (Np, 3) f32, model frame
    shape: Shape | None  # None: a box


def make_model(seed: int, model_id: int, points_per_object: int, kind: str = 'box'
               ) -> SyntheticModel:
    rng = item_rng(seed, 'model-points', model_id)
    n = points_per_object
    if kind == 'box':
        half = model_half_extents(seed, model_id)
        num = max(1, int(rng.integers(int(0.9 * n), int(1.1 * n) + 1)))
        return SyntheticModel(half, box_surface_points(rng, half, num), None)
    shape = make_shape(kind, item_rng(seed, 'model-size', model_id))
    num = max(1, int(rng.integers(int(0.9 * n), int(1.1 * n) + 1)))
    dense = shape.surface_points(0.001)
    points = dense[rng.choice(len(dense), min(num, len(dense)), replace=False)]
    return SyntheticModel(shape.half, points.astype(np.float32), shape)


def _surface(model: SyntheticModel) -> np.ndarray:
    """The dense surface points written to ``nontextured.ply``."""
    return box_surface_grid(model.half) if model.shape is None else \
        model.shape.surface_points(PLY_SPACING)


def eval_points(model: SyntheticModel) -> np.ndarray:
    """The model points as the evaluator samples them (8 mm voxels of the PLY's points)."""
    return voxel_downsample(_surface(model), EVAL_VOXEL)


def grasp_arrays(model: SyntheticModel, grid: tuple[int, int, int], max_width: float):
    """Label grids of one model from the evaluator's physics (:mod:`.labels`)."""
    v, a, d = grid
    if model.shape is None:
        mu, width = box_grasp_labels(model.half, model.points, grid, max_width)
        collision = box_self_collision(model.half, model.points, mu, width, grid)
    else:
        mu, width = shape_grasp_labels(model.shape, model.points, grid, max_width)
        collision = points_collision(mu, width, model.points, grid, eval_points(model))
    offsets = np.empty((len(model.points), v, a, d, 3), np.float32)
    offsets[..., 0] = (np.arange(a) * np.pi / 12).astype(np.float32)[:, None]
    offsets[..., 1] = (np.arange(1, d + 1) * 0.01).astype(np.float32)
    offsets[..., 2] = width
    return offsets, collision, mu, width


def model_mesh(model: SyntheticModel, spacing: float = 0.002) -> tuple:
    """(vertices, triangles) of a closed mesh of the model (exact for boxes and the L, vertices
    about ``spacing`` apart on curved surfaces): the model as a user's mesh file would hold it."""
    if model.shape is None:
        return box_corners(model.half), np.array(BOX_FACES)
    return model.shape.closed_mesh(spacing)


def model_ply(model: SyntheticModel, fmt: str = 'ascii') -> bytes:
    """Dense surface points as real models have (graspnetAPI reads vertices, downsamples at 8 mm):
    ASCII with 6 decimals, or binary little-endian float32."""
    pts = _surface(model)
    head = ['ply', f'format {"ascii" if fmt == "ascii" else "binary_little_endian"} 1.0',
            f'element vertex {len(pts)}', 'property float x', 'property float y',
            'property float z', 'end_header']
    if fmt == 'ascii':
        return ('\n'.join(head + [f'{x:.6f} {y:.6f} {z:.6f}' for x, y, z in pts]) + '\n').encode()
    return ('\n'.join(head) + '\n').encode() + pts.astype('<f4').tobytes()


def model_obj(model: SyntheticModel) -> bytes:
    """The mesh dexnet loads with the SDF (``textured.obj``)."""
    if model.shape is None:
        verts, faces = box_corners(model.half), BOX_FACES
    else:
        verts, faces = model.shape.mesh()
    lines = [f'v {x:.6f} {y:.6f} {z:.6f}' for x, y, z in verts]
    lines += [f'f {i + 1} {j + 1} {k + 1}' for i, j, k in faces]
    return ('\n'.join(lines) + '\n').encode()


def model_sdf(model: SyntheticModel) -> bytes:
    """dexnet's SDF text format: dims, origin, resolution, then values with x fastest."""
    values, origin, res = box_sdf_grid(model.half, None if model.shape is None
                                       else model.shape.sdf)
    head = [' '.join(str(n) for n in values.shape), ' '.join(f'{o:.6f}' for o in origin),
            f'{res:.6f}']
    body = np.char.mod('%.8f', values.transpose(2, 1, 0).reshape(-1))
    return ('\n'.join(head + body.tolist()) + '\n').encode()


def _obb_overlap(c1, yaw1, h1, c2, yaw2, h2) -> bool:
    """2-D separating-axis test for two yawed rectangles (centre, yaw, half sizes)."""
    # rows = rectangle axes
    ax1, ax2 = axis_rotation(2, yaw1)[:2, :2].T, axis_rotation(2, yaw2)[:2, :2].T
    delta = np.asarray(c2) - np.asarray(c1)
    return all(abs(dot(delta, ax)) <= dot(np.abs(matvec(ax1, ax)), h1)
               + dot(np.abs(matvec(ax2, ax)), h2) for ax in np.concatenate([ax1, ax2]))


def place_objects(rng: np.random.Generator, halves: list[np.ndarray]) -> list[np.ndarray]:
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
        poses.append(rigid_transform(axis_rotation(2, yaw), (xy[0], xy[1], half[2])))
    return poses


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """OpenCV camera (x right, y down, z forward) pose at ``eye`` looking at ``target``."""
    z = target - eye
    z /= norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= norm(x)
    return rigid_transform(np.stack([x, np.cross(z, x), z], axis=1), eye)


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
        table_cam = rigid_inverse(cam_wrt_table)
        for pose, half, lab, shape in zip(obj_wrt_table, halves, labels,
                                          shapes or [None] * len(halves)):
            m = matmul(table_cam, pose)  # model -> camera
            corners = transform(box_corners(half), m)
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
            origin = -matvec(r.T, m[:3, 3])  # camera centre in the model frame
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


def write_png(path: str, image: np.ndarray) -> None:
    ok, buf = cv2.imencode('.png', image)
    if not ok:
        raise OSError(f'could not encode {path}')
    tmp = f'{path}.tmp{os.getpid()}'  # a reader never sees half a file
    with open(tmp, 'wb') as f:
        f.write(buf.tobytes())
    os.replace(tmp, path)


def log_progress(progress: bool, msg: str) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


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
