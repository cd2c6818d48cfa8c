"""Box models of the synthetic datasets: surface samples and grids, the mesh, the exact signed
distance and the curved SDF written as ``textured.sdf`` (see :func:`box_sdf_grid`)."""
from __future__ import annotations

import numpy as np

from mmgrasp.geometry.portable import norm

PLY_SPACING = 0.0025  # nontextured.ply surface grid (graspnetAPI voxel-downsamples it at 8 mm)
SDF_RESOLUTION = 0.002  # textured.sdf grid
SDF_PADDING = 0.012  # grid margin around the box
SDF_CURVATURE = 0.5  # 1/m, see box_sdf_grid


def box_surface_points(rng: np.random.Generator, half: np.ndarray, n: int) -> np.ndarray:
    """Uniform samples on the box surface: faces chosen by area, then uniform on the face."""
    areas = np.array([half[1] * half[2], half[0] * half[2], half[0] * half[1]])
    axis = rng.choice(3, size=n, p=areas / areas.sum())
    pts = rng.uniform(-half, half, size=(n, 3))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    pts[np.arange(n), axis] = sign * half[axis]
    return pts.astype(np.float32)


def box_corners(half: np.ndarray) -> np.ndarray:
    return np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half


BOX_FACES = [(0, 3, 2), (0, 1, 3), (4, 7, 5), (4, 6, 7), (0, 5, 1), (0, 4, 5),  # outward normals
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


def box_signed_distance(half: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Exact signed distance to the box (negative inside) of points (..., 3)."""
    q = np.abs(pts) - half
    outside = norm(np.maximum(q, 0))
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
    half = np.asarray(half)
    return curved_sdf_grid(-half, half, lambda pts: box_signed_distance(half, pts)
                           if signed_distance is None else signed_distance(pts))


def sdf_grid_points(lo: np.ndarray, hi: np.ndarray, resolution: float = SDF_RESOLUTION,
                    padding: float = SDF_PADDING):
    """(points (nx, ny, nz, 3), origin (3,), resolution) of the grid on multiples of
    ``resolution`` that covers [lo - padding, hi + padding]."""
    start = np.floor((np.asarray(lo, np.float64) - padding) / resolution)
    stop = np.ceil((np.asarray(hi, np.float64) + padding) / resolution)
    origin = start * resolution
    axes = [origin[k] + resolution * np.arange(int(stop[k] - start[k]) + 1) for k in range(3)]
    return np.stack(np.meshgrid(*axes, indexing='ij'), -1), origin, resolution


def curved_sdf_grid(lo: np.ndarray, hi: np.ndarray, signed_distance,
                    resolution: float = SDF_RESOLUTION, padding: float = SDF_PADDING):
    """(values, origin, resolution) of ``signed_distance`` (points (..., 3) -> distances) on
    :func:`sdf_grid_points`, times (1 + SDF_CURVATURE * (x + y + z)) as :func:`box_sdf_grid`
    explains: what dexnet's contact search needs of any SDF with flat faces."""
    pts, origin, res = sdf_grid_points(lo, hi, resolution, padding)
    values = signed_distance(pts) * (1 + SDF_CURVATURE * pts.sum(-1))
    return values, origin, res
