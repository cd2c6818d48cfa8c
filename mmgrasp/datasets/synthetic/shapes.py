"""Curved and concave model shapes of the synthetic writer: sphere, upright cylinder, capsule
lying along x, torus lying flat, and an L-shaped plate (two boxes).

Boxes have closed forms everywhere (:mod:`.boxes`, :mod:`.labels`); these shapes are
described by an exact signed distance (negative inside; for the L the union's minimum, exact
outside and of the right sign inside), from which the writer ray-casts the depth images, writes
the SDF file, and finds the jaw contacts of the labels. Every shape is centred on its bounding
box, so it rests on the table at height ``half[2]`` like a box. Sizes are drawn so that the
gripper (0.1 m) closes across each shape's narrow side.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull

from mmgrasp.geometry.portable import cos, dot, norm, sin

from .boxes import BOX_FACES, box_corners, box_surface_grid

__all__ = ['SHAPES', 'Shape', 'make_shape']

#: Shape names accepted by the writer (``box`` uses :mod:`.boxes`' closed forms).
SHAPES = ('box', 'sphere', 'cylinder', 'capsule', 'torus', 'lshape')


def _box_sdf(p: np.ndarray, centre, half) -> np.ndarray:
    q = np.abs(p - centre) - half
    return norm(np.maximum(q, 0)) + np.minimum(q.max(-1), 0)


def _hypot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sqrt(x * x + y * y)


def _fibonacci_sphere(radius: float, spacing: float) -> np.ndarray:
    n = max(int(np.ceil(4 * np.pi * radius ** 2 / spacing ** 2)), 12)
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    r, az = np.sqrt(1 - z ** 2), np.pi * (1 + np.sqrt(5.0)) * i
    return radius * np.stack([r * cos(az), r * sin(az), z], 1)


def _ring_angles(radius: float, spacing: float) -> np.ndarray:
    n = max(int(np.ceil(2 * np.pi * radius / spacing)), 8)
    return 2 * np.pi * np.arange(n) / n


def _ring(radius: float, spacing: float) -> np.ndarray:
    a = _ring_angles(radius, spacing)
    return np.stack([radius * cos(a), radius * sin(a)], 1)


def _disc(radius: float, spacing: float) -> np.ndarray:
    rings = [np.zeros((1, 2))] + [_ring(r, spacing) for r in
                                   np.linspace(0, radius, int(np.ceil(radius / spacing)) + 1)[1:]]
    return np.concatenate(rings)


class Shape:
    """One model: ``kind``, parameters ``params`` (metres), bounding half-extents ``half``."""

    def __init__(self, kind: str, params: dict):
        self.kind, self.params = kind, dict(params)
        p = self.params
        if kind == 'sphere':
            half = [p['r']] * 3
        elif kind == 'cylinder':
            half = [p['r'], p['r'], p['h']]
        elif kind == 'capsule':
            half = [p['l'] + p['r'], p['r'], p['r']]
        elif kind == 'torus':
            half = [p['R'] + p['r'], p['R'] + p['r'], p['r']]
        elif kind == 'lshape':
            half = [p['a'], p['a'], p['t']]
        else:
            raise ValueError(f'unknown shape {kind!r}; expected one of {SHAPES[1:]}')
        self.half = np.array(half, np.float64)

    def __repr__(self) -> str:
        return f'Shape({self.kind!r}, {self.params})'

    def _lshape_boxes(self):
        a, w, t = self.params['a'], self.params['w'], self.params['t']
        # arm along x at y in [-a, -a + w], arm along y at x in [-a, -a + w]
        return [(np.array([0.0, -a + w / 2, 0]), np.array([a, w / 2, t])),
                (np.array([-a + w / 2, 0.0, 0]), np.array([w / 2, a, t]))]

    def sdf(self, pts: np.ndarray) -> np.ndarray:
        """Signed distance (negative inside) of points (..., 3) in the model frame."""
        p, prm = np.asarray(pts, np.float64), self.params
        if self.kind == 'sphere':
            return norm(p) - prm['r']
        if self.kind == 'cylinder':
            d = np.stack([_hypot(p[..., 0], p[..., 1]) - prm['r'],
                          np.abs(p[..., 2]) - prm['h']], -1)
            return np.minimum(d.max(-1), 0) + norm(np.maximum(d, 0))
        if self.kind == 'capsule':
            dx = np.maximum(np.abs(p[..., 0]) - prm['l'], 0)
            return np.sqrt(dx ** 2 + p[..., 1] ** 2 + p[..., 2] ** 2) - prm['r']
        if self.kind == 'torus':
            return _hypot(_hypot(p[..., 0], p[..., 1]) - prm['R'], p[..., 2]) - prm['r']
        return np.minimum(*[_box_sdf(p, c, h) for c, h in self._lshape_boxes()])

    def normal(self, pts: np.ndarray, step: float = 1e-5) -> np.ndarray:
        """Unit outward normals (gradient of the SDF by central differences) at points (N, 3)."""
        grad = np.stack([self.sdf(pts + step * e) - self.sdf(pts - step * e)
                         for e in np.eye(3)], -1)
        return grad / np.maximum(norm(grad), 1e-12)[..., None]

    def surface_points(self, spacing: float) -> np.ndarray:
        """Points (N, 3) covering the surface at most about ``spacing`` apart."""
        prm = self.params
        if self.kind == 'sphere':
            return _fibonacci_sphere(prm['r'], spacing)
        if self.kind == 'cylinder':
            ring = _ring(prm['r'], spacing)
            zs = np.linspace(-prm['h'], prm['h'], int(np.ceil(2 * prm['h'] / spacing)) + 1)
            side = np.concatenate([np.c_[ring, np.full(len(ring), z)] for z in zs])
            disc = _disc(prm['r'], spacing)
            caps = [np.c_[disc, np.full(len(disc), s * prm['h'])] for s in (-1, 1)]
            return np.concatenate([side, *caps])
        if self.kind == 'capsule':
            ring = _ring(prm['r'], spacing)
            xs = np.linspace(-prm['l'], prm['l'], int(np.ceil(2 * prm['l'] / spacing)) + 1)
            side = np.concatenate([np.c_[np.full(len(ring), x), ring] for x in xs])
            ball = _fibonacci_sphere(prm['r'], spacing)
            ends = [ball[ball[:, 0] * s > 0] + [s * prm['l'], 0, 0] for s in (-1, 1)]
            return np.concatenate([side, *ends])
        if self.kind == 'torus':
            theta, small = _ring_angles(prm['R'] + prm['r'], spacing), _ring(prm['r'], spacing)
            rad = prm['R'] + small[:, 0]
            return np.stack([rad[None] * cos(theta)[:, None], rad[None] * sin(theta)[:, None],
                             np.broadcast_to(small[:, 1], (len(theta), len(small)))],
                            -1).reshape(-1, 3)
        parts = [box_surface_grid(h, spacing) + c for c, h in self._lshape_boxes()]
        pts = np.concatenate(parts)
        return pts[self.sdf(pts) > -1e-9]  # drop the faces inside the other box

    def mesh(self) -> tuple:
        """(vertices (V, 3), triangles (F, 3)) for ``textured.obj`` (dexnet loads it; the
        evaluation reads the SDF)."""
        if self.kind == 'lshape':
            verts = np.concatenate([box_corners(h) + c for c, h in self._lshape_boxes()])
            faces = np.concatenate([np.array(BOX_FACES), np.array(BOX_FACES) + 8])
            return verts, faces
        if self.kind == 'torus':
            return self._torus_mesh(32, 12)
        verts = self.surface_points(0.01)
        return verts, ConvexHull(verts).simplices

    def _torus_mesh(self, n: int, m: int) -> tuple:
        """The torus as an n x m grid of quads (two triangles each), outward-oriented."""
        prm = self.params
        th, ph = np.meshgrid(2 * np.pi * np.arange(n) / n, 2 * np.pi * np.arange(m) / m,
                             indexing='ij')
        rad = prm['R'] + prm['r'] * cos(ph)
        verts = np.stack([rad * cos(th), rad * sin(th), prm['r'] * sin(ph)],
                         -1).reshape(-1, 3)
        i, j = np.meshgrid(np.arange(n), np.arange(m), indexing='ij')
        a, b = i * m + j, ((i + 1) % n) * m + j
        c, d = ((i + 1) % n) * m + (j + 1) % m, i * m + (j + 1) % m
        faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3),
                                np.stack([a, c, d], -1).reshape(-1, 3)])
        return verts, faces

    def closed_mesh(self, spacing: float = 0.002) -> tuple:
        """(vertices (V, 3), triangles (F, 3)) of a closed, outward-oriented surface with
        vertices about ``spacing`` apart, for exporting the model as a mesh (the L as one
        extruded polygon, not two overlapping boxes as :meth:`mesh`)."""
        prm = self.params
        if self.kind == 'torus':
            n = max(32, int(np.ceil(2 * np.pi * (prm['R'] + prm['r']) / spacing)))
            m = max(12, int(np.ceil(2 * np.pi * prm['r'] / spacing)))
            return self._torus_mesh(n, m)
        if self.kind == 'lshape':
            a, w, t = prm['a'], prm['w'], prm['t']
            ring = np.array([[-a, -a], [a, -a], [a, -a + w], [-a + w, -a + w], [-a + w, a],
                             [-a, a]])  # counter-clockwise seen from +z
            verts = np.concatenate([np.c_[ring, np.full(6, -t)], np.c_[ring, np.full(6, t)]])
            caps = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5)]  # fans from the outer corner
            faces = [(k, j, i) for i, j, k in caps] + [(i + 6, j + 6, k + 6) for i, j, k in caps]
            for i in range(6):
                j = (i + 1) % 6
                faces += [(i, j, j + 6), (i, j + 6, i + 6)]
            return verts, np.array(faces)
        verts = self.surface_points(spacing)
        hull = ConvexHull(verts)
        faces = hull.simplices.copy()
        centre = verts[faces].mean(1)
        inward = np.einsum('ij,ij->i', np.cross(verts[faces[:, 1]] - verts[faces[:, 0]],
                                                verts[faces[:, 2]] - verts[faces[:, 0]]),
                           centre) < 0
        faces[inward] = faces[inward][:, ::-1]
        return verts, faces

    def ray_depths(self, origin: np.ndarray, dirs: np.ndarray, max_steps: int = 200,
                   eps: float = 1e-7) -> np.ndarray:
        """Ray parameter t of the first hit of rays ``origin + t * dirs`` (model frame; dirs
        (..., 3), any length), inf where a ray misses: sphere tracing on the exact SDF, which
        steps at most the distance to the surface and so never passes through it."""
        speed = norm(dirs)
        bound = norm(self.half) + 1e-3
        # start where the ray enters the bounding sphere
        b = dot(dirs, origin) / speed ** 2
        disc = b ** 2 - (dot(origin, origin) - bound ** 2) / speed ** 2
        t = np.where(disc > 0, -b - np.sqrt(np.maximum(disc, 0)), np.inf)
        t = np.maximum(t, 0)
        active = np.isfinite(t)
        t_far = np.where(active, -b + np.sqrt(np.maximum(disc, 0)), 0)
        hit = np.zeros(t.shape, bool)
        for _ in range(max_steps):
            idx = np.nonzero(active)
            if not len(idx[0]):
                break
            d = self.sdf(origin + t[idx][..., None] * dirs[idx])
            done = d < eps
            hit[tuple(i[done] for i in idx)] = True
            t[idx] += np.where(done, 0, d / speed[idx])
            gone = ~done & (t[idx] > t_far[idx])
            still = ~done & ~gone
            active[idx] = still
        return np.where(hit, t, np.inf)


def make_shape(kind: str, rng: np.random.Generator) -> Shape:
    """A shape of ``kind`` with sizes drawn from ``rng`` (metres)."""
    u = rng.uniform
    params = {'sphere': lambda: {'r': u(0.02, 0.035)},
              'cylinder': lambda: {'r': u(0.018, 0.035), 'h': u(0.02, 0.045)},
              'capsule': lambda: {'r': u(0.016, 0.028), 'l': u(0.01, 0.03)},
              'torus': lambda: {'R': u(0.03, 0.04), 'r': u(0.01, 0.014)},
              'lshape': lambda: {'a': u(0.03, 0.045), 'w': u(0.018, 0.03), 't': u(0.012, 0.02)}}
    if kind not in params:
        raise ValueError(f'unknown shape {kind!r}; expected one of {SHAPES}')
    return Shape(kind, params[kind]())
