"""Point-set helpers with graspnetAPI's exact rules (table grid, voxel downsampling, poses)."""
from __future__ import annotations

import functools
import math

import numpy as np


def voxel_downsample(points: np.ndarray, voxel_size: float) -> np.ndarray:
    """open3d's ``voxel_down_sample``: the mean of the points in each occupied voxel.

    Voxels are counted from ``min(points) - voxel_size / 2``: index = floor((p - bound) / size).
    Sums run in input order in float64, as open3d accumulates. Output order: by voxel index
    (open3d's is its hash map's, which no caller here depends on).
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    if len(points) == 0:
        return points.copy()
    bound = points.min(axis=0) - voxel_size * 0.5
    index = np.floor((points - bound) / voxel_size).astype(np.int64)
    size = index.max(axis=0) + 1
    if np.prod(size.astype(np.float64)) < 2.0 ** 62:  # one integer key a voxel, same order
        index = (index[:, 0] * size[1] + index[:, 1]) * size[2] + index[:, 2]
    _, inverse, counts = np.unique(index, axis=0 if index.ndim == 2 else None,
                                   return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    sums = np.stack([np.bincount(inverse, weights=points[:, d]) for d in range(3)], axis=1)
    return sums / counts[:, None]


def table_points(lx: float = 1.0, ly: float = 1.0, lz: float = 0.05, dx: float = -0.5,
                 dy: float = -0.5, dz: float = -0.05, grid_size: float = 0.008) -> np.ndarray:
    """graspnetAPI's ``create_table_points``: a grid box in the table frame, (N, 3), laid out
    (y, x, z), z fastest."""
    x, y, z = np.meshgrid(*_table_axes(lx, ly, lz, grid_size), indexing='xy')
    return np.stack([x + dx, y + dy, z + dz], axis=-1).reshape(-1, 3)


def _table_axes(lx: float, ly: float, lz: float, grid_size: float) -> list:
    return [np.linspace(0, length, int(length / grid_size)) for length in (lx, ly, lz)]


_CORNERS = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], dtype=bool)


class PosedTable:
    """graspnetAPI's table points (:func:`table_points`) posed by ``to_frame``, computed only
    near the boxes asked for.

    graspnetAPI poses all 93 750 table points every frame and keeps, per object, those inside
    the object's box; ``inside`` returns the same points (each row the same product as in
    ``transform_points(table, to_frame)``, in table order) from the few grid cells the box can
    reach: its corners are brought back to the table frame, widened by ``slack`` metres (far
    more than the rounding of the inverse), and only that part of the grid is posed.
    """

    def __init__(self, to_frame: np.ndarray, lx: float = 1.0, ly: float = 1.0,
                 lz: float = 0.05, dx: float = -0.5, dy: float = -0.5, dz: float = -0.05,
                 grid_size: float = 0.008, slack: float = 1e-3):
        self.to_frame = np.asarray(to_frame)
        self.to_table = np.linalg.inv(self.to_frame.astype(np.float64))
        self.axes = _grid_axes(lx, ly, lz, dx, dy, dz, grid_size)
        self.slack = slack

    def inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Posed table points p with lo < p < hi on every axis, (N, 3).

        The grid points of the reachable cells are written straight from the axes (the values
        :func:`table_points` holds, in its order) as homogeneous columns, and posed by one
        product with ``transform_points``'s arithmetic (the same BLAS call on the same
        numbers)."""
        corners = transform_points(np.where(_CORNERS, hi, lo), self.to_table)
        ranges = [axis[np.searchsorted(axis, a):np.searchsorted(axis, b, 'right')]
                  for axis, a, b in zip(self.axes, corners.min(0) - self.slack,
                                        corners.max(0) + self.slack)]
        x, y, z = ranges
        grid = np.empty((4, len(y), len(x), len(z)))  # table order: y, x, z (z fastest)
        grid[0] = x[None, :, None]
        grid[1] = y[:, None, None]
        grid[2] = z[None, None, :]
        grid[3] = 1.0
        posed = np.matmul(self.to_frame, grid.reshape(4, -1))[:3].T
        return posed[in_box(posed, lo, hi)]


def in_box(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(N,) bool: lo < p < hi on every axis (one column at a time: faster than ``all``)."""
    inside = (points[:, 0] > lo[0]) & (points[:, 0] < hi[0])
    for axis in (1, 2):
        inside &= (points[:, axis] > lo[axis]) & (points[:, axis] < hi[axis])
    return inside


@functools.lru_cache(maxsize=4)
def _grid_axes(lx, ly, lz, dx, dy, dz, grid_size) -> tuple:
    """The coordinates along x, y and z that the table points take (read-only)."""
    axes = tuple(a + d for a, d in zip(_table_axes(lx, ly, lz, grid_size), (dx, dy, dz)))
    for axis in axes:
        axis.flags.writeable = False
    return axes


def transform_points(points: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """Apply a 4x4 transform to (N, 3) points (graspnetAPI's homogeneous product)."""
    ones = np.ones([points.shape[0], 1], dtype=points.dtype)
    return np.matmul(trans, np.concatenate([points, ones], axis=-1).T).T[:, :3]


def nearest_indices(queries: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Index of the nearest of ``points`` for each query, as ``argmin`` of the Euclidean
    distances picks it (ties: the first; float64), in a compiled loop
    (:func:`.compiled.nearest_rows`)."""
    from .compiled import nearest_rows  # numba: imported on first use
    queries = np.ascontiguousarray(queries, dtype=np.float64).reshape(-1, 3)
    points = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    if len(points) == 0 and len(queries):
        raise ValueError('nearest_indices: no points to choose from')
    out = np.empty(len(queries), dtype=np.int64)
    nearest_rows(queries, points, out)
    return out


def quaternion_to_graspnet_pose(translation, quaternion) -> np.ndarray:
    """The float32 4x4 pose graspnetAPI builds from an annotation's translation and w x y z
    quaternion: quaternion -> matrix -> static-xyz Euler angles -> degrees -> radians -> matrix
    (transforms3d's formulas, in its operation order)."""
    w, x, y, z = (float(v) for v in quaternion)
    nq = w * w + x * x + y * y + z * z
    if nq < np.finfo(float).eps:
        m = np.eye(3)
    else:
        s = 2.0 / nq
        X, Y, Z = x * s, y * s, z * s
        wX, wY, wZ = w * X, w * Y, w * Z
        xX, xY, xZ = x * X, x * Y, x * Z
        yY, yZ, zZ = y * Y, y * Z, z * Z
        m = np.array([[1.0 - (yY + zZ), xY - wZ, xZ + wY],
                      [xY + wZ, 1.0 - (xX + zZ), yZ - wX],
                      [xZ - wY, yZ + wX, 1.0 - (xX + yY)]])
    m = m.tolist()
    cy = math.sqrt(m[0][0] * m[0][0] + m[1][0] * m[1][0])
    if cy > np.finfo(float).eps * 4.0:
        ax = math.atan2(m[2][1], m[2][2])
        ay = math.atan2(-m[2][0], cy)
        az = math.atan2(m[1][0], m[0][0])
    else:
        ax = math.atan2(-m[1][2], m[1][1])
        ay = math.atan2(-m[2][0], cy)
        az = 0.0
    # graspnetAPI stores degrees (a * (180 / pi)) and converts back (a / 180 * pi)
    angles = [a * (180.0 / np.pi) / 180.0 * np.pi for a in (ax, ay, az)]
    si, sj, sk = (math.sin(a) for a in angles)
    ci, cj, ck = (math.cos(a) for a in angles)
    cc, cs, sc, ss = ci * ck, ci * sk, si * ck, si * sk
    pose = np.zeros((4, 4), dtype=np.float32)
    pose[:3, :3] = [[cj * ck, sj * sc - cs, sj * cc + ss],
                    [cj * sk, sj * ss + cc, sj * cs - sc],
                    [-sj, cj * si, cj * ci]]
    pose[:3, 3] = [float(v) for v in translation]
    pose[3, 3] = 1
    return pose
