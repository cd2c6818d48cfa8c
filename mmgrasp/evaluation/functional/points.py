"""Point-set helpers with graspnetAPI's exact rules (table grid, voxel downsampling, poses)."""
from __future__ import annotations

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
    _, inverse, counts = np.unique(index, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    sums = np.stack([np.bincount(inverse, weights=points[:, d]) for d in range(3)], axis=1)
    return sums / counts[:, None]


def table_points(lx: float = 1.0, ly: float = 1.0, lz: float = 0.05, dx: float = -0.5,
                 dy: float = -0.5, dz: float = -0.05, grid_size: float = 0.008) -> np.ndarray:
    """graspnetAPI's ``create_table_points``: a grid box in the table frame, (N, 3)."""
    xs = np.linspace(0, lx, int(lx / grid_size))
    ys = np.linspace(0, ly, int(ly / grid_size))
    zs = np.linspace(0, lz, int(lz / grid_size))
    x, y, z = np.meshgrid(xs, ys, zs, indexing='xy')
    return np.stack([x + dx, y + dy, z + dz], axis=-1).reshape(-1, 3)


def transform_points(points: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """Apply a 4x4 transform to (N, 3) points (graspnetAPI's homogeneous product)."""
    ones = np.ones([points.shape[0], 1], dtype=points.dtype)
    return np.matmul(trans, np.concatenate([points, ones], axis=-1).T).T[:, :3]


def nearest_indices(queries: np.ndarray, points: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Index of the nearest of ``points`` for each query (ties: the first), chunked."""
    out = np.empty(len(queries), dtype=np.int64)
    for s in range(0, len(queries), chunk):
        d = np.linalg.norm(queries[s:s + chunk, None, :] - points[None, :, :], axis=-1)
        out[s:s + chunk] = np.argmin(d, axis=-1)
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
