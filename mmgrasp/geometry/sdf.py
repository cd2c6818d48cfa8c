"""Signed distance fields in dexnet's format, sampled and differentiated the way dexnet does.

A dexnet ``.sdf`` file is text: ``nx ny nz`` / ``ox oy oz`` (origin, metres) / resolution
(metres per cell) / then nx*ny*nz values, x fastest, then y, then z. Grid coordinates are
``(p - origin) / resolution``. Points pass through float32 on every change of frame, as in
dexnet (its ``transform_pt_*`` cast to float32), so contacts land where dexnet's land.
"""
from __future__ import annotations

import copy
import functools
import os
from typing import Optional

import numpy as np
from scipy.spatial import cKDTree

# dexnet's Sdf3D corner order for trilinear interpolation: corner i's offset (dx, dy, dz)
_CORNERS = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1],
                     [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=np.int64)


def _normal_offsets(delta: float) -> np.ndarray:
    """The 27 probe offsets of dexnet's surface_normal: a 3x3x3 lattice pushed onto a sphere."""
    steps = np.array([-delta, 0.0, delta])
    d = np.stack(np.meshgrid(steps, steps, steps, indexing='ij'), -1).reshape(-1, 3)
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    nonzero = norm[:, 0] > 0
    d[nonzero] = delta * d[nonzero] / norm[nonzero]
    return d


class SignedDistanceField:
    """A dexnet-style SDF: trilinear values, on-surface test, plane-fit surface normals.

    Args:
        data: (nx, ny, nz) signed distances in metres (negative inside).
        origin: (3,) position of grid cell (0, 0, 0) in the object frame.
        resolution: cell size in metres.
        surface_sample: grid indices (M, 3) of surface cells used for out-of-grid queries (dexnet
            draws 1000 with np.random; None uses every surface cell, which is deterministic).
    """

    def __init__(self, data: np.ndarray, origin: np.ndarray, resolution: float,
                 surface_sample: Optional[np.ndarray] = None):
        self.data = np.ascontiguousarray(data, dtype=np.float64)  # flat index below
        if self.data.ndim != 3:
            raise ValueError(f'SDF data must be 3-D, got shape {self.data.shape}')
        self.origin = np.asarray(origin, dtype=np.float64).reshape(3)
        self.resolution = float(resolution)
        self.dims = np.array(self.data.shape, dtype=np.int64)
        self.surface_thresh = self.resolution * np.sqrt(2) / 2
        self.surface_cells = np.argwhere(np.abs(self.data) < self.surface_thresh)
        if len(self.surface_cells) == 0:
            raise ValueError('SDF has no cell within resolution*sqrt(2)/2 of its zero set')
        self.surface_sample = self.surface_cells if surface_sample is None else \
            np.asarray(surface_sample, dtype=np.int64)
        self._inv_res = 1.0 / self.resolution
        self._grid_shift = -self._inv_res * self.origin

    @functools.cached_property
    def _sample_tree(self) -> cKDTree:  # built at the first out-of-grid query
        return cKDTree(self.surface_sample.astype(np.float64))

    def with_surface_sample(self, surface_sample: np.ndarray) -> 'SignedDistanceField':
        """The same field with another out-of-grid surface sample, nothing recomputed."""
        other = copy.copy(self)
        other.__dict__.pop('_sample_tree', None)
        other.surface_sample = np.asarray(surface_sample, dtype=np.int64)
        return other

    # frames -------------------------------------------------------------------------------
    def to_grid(self, points: np.ndarray) -> np.ndarray:
        """Object-frame points (..., 3) to grid coordinates (float32 on the way, as dexnet)."""
        p = np.asarray(points).astype(np.float32).astype(np.float64)
        return p * self._inv_res + self._grid_shift

    def to_object(self, grid: np.ndarray) -> np.ndarray:
        """Grid coordinates (..., 3) to object-frame points (float32 on the way, as dexnet)."""
        g = np.asarray(grid).astype(np.float32).astype(np.float64)
        return g * self.resolution + self.origin

    # values -------------------------------------------------------------------------------
    def __call__(self, grid: np.ndarray) -> np.ndarray:
        """Signed distance at grid coordinates (..., 3), trilinear inside the grid.

        Outside the grid: distance (metres) to the nearest surface-sample cell plus the SDF
        value stored there, as dexnet's ``_signed_distance``.
        """
        grid = np.asarray(grid, dtype=np.float64)
        shape = grid.shape[:-1]
        c = grid.reshape(-1, 3)
        out = np.empty(len(c))
        outside = np.any(c < 0, axis=1) | np.any(c >= self.dims, axis=1)
        inside = ~outside
        if inside.any():
            out[inside] = self._trilinear(c[inside])
        if outside.any():
            out[outside] = self._outside(c[outside])
        return out.reshape(shape)

    def _trilinear(self, c: np.ndarray) -> np.ndarray:
        return _trilinear(self.data.reshape(-1), 0, self.dims, c)

    def _outside(self, c: np.ndarray) -> np.ndarray:
        _, index = self._sample_tree.query(c)
        nearest = self.surface_sample[index]
        gap = np.linalg.norm(self.to_object(nearest) - self.to_object(c), axis=1)
        return gap + self.data[nearest[:, 0], nearest[:, 1], nearest[:, 2]]

    def on_surface(self, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask, values): ``|sdf| < resolution * sqrt(2) / 2`` at grid coordinates (..., 3)."""
        values = self(grid)
        return np.abs(values) < self.surface_thresh, values

    def surface_normal(self, grid: np.ndarray, delta: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
        """Outward unit normals at surface grid points (K, 3), as dexnet's ``surface_normal``
        (see :meth:`SignedDistanceFields.surface_normal`). Returns (normals, valid)."""
        grid = np.asarray(grid, dtype=np.float64).reshape(-1, 3)
        return SignedDistanceFields([self]).surface_normal(grid, np.zeros(len(grid), np.int64),
                                                           delta)


def _trilinear(flat_data: np.ndarray, start, dims: np.ndarray, c: np.ndarray) -> np.ndarray:
    """dexnet's trilinear value at grid coordinates ``c`` (N, 3) inside the grid: ``dims``
    (3,) or per point (N, 3), the grid's values from ``flat_data[start]`` on (scalar or (N,))."""
    c = np.minimum(c, dims - 1)  # dexnet snaps (dims - 1, dims) onto the last cell
    base = np.floor(c).astype(np.int64)
    dims = np.broadcast_to(dims, c.shape)
    nx, ny, nz = dims[:, 0], dims[:, 1], dims[:, 2]
    sd = np.zeros(len(c))
    for offset in _CORNERS:  # dexnet's corner order and float operation order
        p = base + offset
        valid = (p[:, 0] < nx) & (p[:, 1] < ny) & (p[:, 2] < nz)
        flat = (p[:, 0] * ny + p[:, 1]) * nz + p[:, 2] + start
        v = np.where(valid, flat_data.take(np.where(valid, flat, 0)), 0.0)
        w1 = -np.abs(p - c) + 1
        sd = sd + w1[:, 0] * w1[:, 1] * w1[:, 2] * v
    return sd


@functools.lru_cache(maxsize=4)
def _normal_probes(delta: float) -> np.ndarray:
    offsets = _normal_offsets(delta)
    offsets.flags.writeable = False
    return offsets


class SignedDistanceFields:
    """Several :class:`SignedDistanceField` queried in one pass: every query names its field
    (``field``, an index into ``fields``, shaped as the queries without their last axis).

    The evaluation closes the jaws of the grasps of every object of many frames at once
    (:func:`~mmgrasp.geometry.close_jaws`); each query gets its own field's arithmetic, value
    for value what that field alone computes (the grids side by side in one flat array, the
    per-field constants gathered per query).
    """

    def __init__(self, fields):
        self.fields = list(fields)
        if not self.fields:
            raise ValueError('SignedDistanceFields needs at least one field')
        sizes = [f.data.size for f in self.fields]
        self.flat = self.fields[0].data.reshape(-1) if len(self.fields) == 1 else \
            np.concatenate([f.data.reshape(-1) for f in self.fields])
        self.start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.dims = np.stack([f.dims for f in self.fields])
        self.origin = np.stack([f.origin for f in self.fields])
        self.resolution = np.array([f.resolution for f in self.fields])
        self.inv_res = np.array([f._inv_res for f in self.fields])
        self.grid_shift = np.stack([f._grid_shift for f in self.fields])
        self.surface_thresh = np.array([f.surface_thresh for f in self.fields])

    def to_grid(self, points: np.ndarray, field: np.ndarray) -> np.ndarray:
        """Object-frame points (..., 3) of their fields to grid coordinates (float32 on the
        way, as dexnet)."""
        p = np.asarray(points).astype(np.float32).astype(np.float64)
        return p * self.inv_res[field][..., None] + self.grid_shift[field]

    def to_object(self, grid: np.ndarray, field: np.ndarray) -> np.ndarray:
        """Grid coordinates (..., 3) to object-frame points (float32 on the way, as dexnet)."""
        g = np.asarray(grid).astype(np.float32).astype(np.float64)
        return g * self.resolution[field][..., None] + self.origin[field]

    def __call__(self, grid: np.ndarray, field: np.ndarray) -> np.ndarray:
        """Signed distance at grid coordinates (..., 3), each in its field
        (:meth:`SignedDistanceField.__call__`)."""
        grid = np.asarray(grid, dtype=np.float64)
        shape = grid.shape[:-1]
        c = grid.reshape(-1, 3)
        field = np.broadcast_to(field, shape).reshape(-1)
        dims = self.dims[field]
        out = np.empty(len(c))
        outside = np.any(c < 0, axis=1) | np.any(c >= dims, axis=1)
        inside = ~outside
        if inside.any():
            out[inside] = _trilinear(self.flat, self.start[field[inside]], dims[inside],
                                     c[inside])
        if outside.any():
            where = np.flatnonzero(outside)
            for f in np.unique(field[where]):
                rows = where[field[where] == f]
                out[rows] = self.fields[f]._outside(c[rows])
        return out.reshape(shape)

    def surface_normal(self, grid: np.ndarray, field: np.ndarray,
                       delta: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
        """Outward unit normals at surface grid points (K, 3) of fields ``field`` (K,), as
        dexnet's ``surface_normal``.

        Fits a plane (smallest singular vector) to the on-surface probes of a 27-point lattice of
        radius ``delta`` cells, orients it so the SDF grows along it. Returns (normals, valid);
        invalid where the point itself is not on the surface.
        """
        grid = np.asarray(grid, dtype=np.float64).reshape(-1, 3)
        k = len(grid)
        thresh = self.surface_thresh[field]
        here = self(grid, field)
        valid = np.abs(here) < thresh
        probes = grid[:, None, :] + _normal_probes(float(delta))[None]  # (K, 27, 3)
        values = self(probes, field[:, None])
        on = np.abs(values) < thresh[:, None]
        # dexnet sorts the kept probes by SDF value (stable) before fitting
        key = np.where(on, values, np.inf)
        order = np.argsort(key, axis=1, kind='stable')
        probes = np.take_along_axis(probes, order[..., None], axis=1)
        on = np.take_along_axis(on, order, axis=1)
        count = np.maximum(on.sum(axis=1), 1)
        masked = np.where(on[..., None], probes, 0.0)
        mean = masked.sum(axis=1) / count[:, None]
        centred = np.where(on[..., None], probes - mean[:, None, :], 0.0)
        u, _, _ = np.linalg.svd(np.swapaxes(centred, 1, 2))
        normals = u[:, :, 2].copy()
        flip = self(grid + normals * 0.01, field) < here
        normals[flip] = -normals[flip]
        normals[~valid] = np.nan
        return normals.reshape(k, 3), valid


def read_dexnet_sdf(path: str | os.PathLike,
                    surface_sample: Optional[np.ndarray] = None) -> SignedDistanceField:
    """Read a dexnet ``.sdf`` text file (see the module docstring)."""
    return SignedDistanceField(*parse_dexnet_sdf(path), surface_sample)


def parse_dexnet_sdf(path: str | os.PathLike) -> tuple:
    """(data (nx, ny, nz), origin (3,), resolution) of a dexnet ``.sdf`` text file."""
    with open(path, 'rb') as f:  # bytes: no decoding, and float() parses bytes tokens
        header = [f.readline() for _ in range(3)]
        body = f.read()
    try:
        dims = [int(v) for v in header[0].split()]
        origin = [float(v) for v in header[1].split()]
        resolution = float(header[2])
        if len(dims) != 3 or len(origin) != 3:
            raise ValueError('header must be "nx ny nz" / "ox oy oz" / resolution')
        values = np.array(body.split(), dtype=np.float64)
    except ValueError as err:
        raise ValueError(f'{path}: not a dexnet SDF file ({err})') from None
    n = dims[0] * dims[1] * dims[2]
    if len(values) != n:
        raise ValueError(f'{path}: header says {dims} = {n} values, file has {len(values)}')
    data = values.reshape(dims[2], dims[1], dims[0]).transpose(2, 1, 0)
    return data, np.array(origin), resolution


def write_dexnet_sdf(path: str | os.PathLike, data: np.ndarray, origin: np.ndarray,
                     resolution: float) -> None:
    """Write ``data`` (nx, ny, nz) in dexnet's text format, through a temporary name."""
    data = np.asarray(data, dtype=np.float64)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write('%d %d %d\n' % data.shape)
        f.write('%.10f %.10f %.10f\n' % tuple(np.asarray(origin, dtype=np.float64)))
        f.write('%.10f\n' % resolution)
        np.savetxt(f, data.transpose(2, 1, 0).reshape(-1), fmt='%.10f')
    os.replace(tmp, path)
