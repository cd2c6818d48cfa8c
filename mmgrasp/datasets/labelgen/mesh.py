"""Triangle meshes of objects (PLY or OBJ, metres): reading, writing, surface samples, and the
signed distance field the labels and the evaluator read.

Label points follow GraspNet-1Billion's annotation (Fang et al., CVPR 2020, section 3.3: grasp
points "uniformly distributed in voxel space"): the surface is sampled densely (area-weighted,
seeded), then voxel-downsampled with open3d's rule (:func:`mmgrasp.geometry.voxel_downsample`,
the mean of each occupied voxel); the voxel size is not published and is a setting here.

The signed distance comes from the mesh through open3d's ``RaycastingScene`` (exact distance
to the triangles, inside by ray parity; chosen by accuracy and speed against pysdf, trimesh
and point-cloud-utils, docs/notes/benchmarks/label_generation.md), sampled on a grid and written as dexnet's
``textured.sdf``, the file the evaluator reads.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
from plyfile import PlyData, PlyElement

from mmgrasp.geometry import voxel_downsample

#: dense surface samples per square metre before the voxel downsampling (about 1 mm apart)
SURFACE_DENSITY = 1.0e6


class TriangleMesh(NamedTuple):
    vertices: np.ndarray  # (V, 3) float64, metres
    faces: np.ndarray  # (F, 3) int64


def read_mesh(path: str | os.PathLike) -> TriangleMesh:
    """A triangle mesh from a PLY (ASCII or binary, faces as vertex index lists) or an OBJ
    (``v`` and ``f`` lines; polygons are fanned into triangles). Raises ValueError naming the
    file when it holds no triangles or indexes a missing vertex."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == '.ply':
        vertices, faces = _read_ply(path)
    elif ext == '.obj':
        vertices, faces = _read_obj(path)
    else:
        raise ValueError(f'{path}: expected a .ply or .obj mesh')
    if len(faces) == 0:
        raise ValueError(f'{path}: no triangles (a point cloud is not a mesh: the labels need '
                         'the surface to compute signed distances)')
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ValueError(f'{path}: a face indexes vertex {int(faces.max())} of {len(vertices)}')
    if not np.isfinite(vertices).all():
        raise ValueError(f'{path}: vertices that are not finite')
    return TriangleMesh(vertices, faces)


def _fan(polygons) -> np.ndarray:
    tris = [(p[0], p[i], p[i + 1]) for p in polygons for i in range(1, len(p) - 1)]
    return np.asarray(tris, np.int64).reshape(-1, 3)


def _read_ply(path: str):
    try:
        ply = PlyData.read(path)
        v = ply['vertex']
        vertices = np.stack([np.asarray(v[k], np.float64) for k in 'xyz'], 1)
        faces = np.zeros((0, 3), np.int64)
        if 'face' in ply:
            prop = ply['face'].properties[0].name  # vertex_indices or vertex_index
            faces = _fan(ply['face'][prop])
    except Exception as err:  # noqa: BLE001 - plyfile raises several kinds; one message
        raise ValueError(f'{path}: not a readable PLY mesh ({type(err).__name__}: {err})') \
            from None
    return vertices, faces


def _read_obj(path: str):
    vertices, polygons = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == 'v':
                vertices.append([float(x) for x in parts[1:4]])
            elif parts[0] == 'f':
                idx = [int(p.split('/')[0]) for p in parts[1:]]
                polygons.append([i - 1 if i > 0 else len(vertices) + i for i in idx])
    return np.asarray(vertices, np.float64).reshape(-1, 3), _fan(polygons)


def write_mesh_ply(path: str, mesh: TriangleMesh, binary: bool = True) -> None:
    """A PLY with float32 vertices and int32 triangles, through a temporary name."""
    verts = np.empty(len(mesh.vertices), [('x', 'f4'), ('y', 'f4'), ('z', 'f4')])
    for k, name in enumerate('xyz'):
        verts[name] = mesh.vertices[:, k]
    faces = np.empty(len(mesh.faces), [('vertex_indices', 'i4', (3,))])
    faces['vertex_indices'] = mesh.faces
    tmp = f'{path}.tmp{os.getpid()}'
    PlyData([PlyElement.describe(verts, 'vertex'), PlyElement.describe(faces, 'face')],
            text=not binary).write(tmp)
    os.replace(tmp, path)


def write_mesh_obj(path: str, mesh: TriangleMesh) -> None:
    """An OBJ (``v`` and ``f`` lines), through a temporary name."""
    lines = [f'v {x:.6f} {y:.6f} {z:.6f}' for x, y, z in mesh.vertices]
    lines += [f'f {i + 1} {j + 1} {k + 1}' for i, j, k in mesh.faces]
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    os.replace(tmp, path)


def sample_surface(mesh: TriangleMesh, count: int, seed: int = 0) -> np.ndarray:
    """``count`` points (float64) uniform on the surface: triangles by area, then uniform
    barycentric coordinates, from ``np.random.default_rng(seed)``."""
    tri = mesh.vertices[mesh.faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    if not area.sum() > 0:
        raise ValueError('the mesh has no surface area')
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(tri), size=count, p=area / area.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    t = tri[pick]
    return t[:, 0] + u[:, None] * (t[:, 1] - t[:, 0]) + v[:, None] * (t[:, 2] - t[:, 0])


def surface_area(mesh: TriangleMesh) -> float:
    tri = mesh.vertices[mesh.faces]
    return float(0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]),
                                      axis=1).sum())


def label_points(mesh: TriangleMesh, voxel_size: float, seed: int = 0) -> np.ndarray:
    """GraspNet's label points: a dense surface sample (``SURFACE_DENSITY``) voxel-downsampled
    at ``voxel_size``, float32 (N, 3) in the model frame."""
    count = max(int(np.ceil(surface_area(mesh) * SURFACE_DENSITY)), 1000)
    return voxel_downsample(sample_surface(mesh, count, seed), voxel_size).astype(np.float32)


def mesh_signed_distance(mesh: TriangleMesh, points: np.ndarray,
                         backend: str = 'open3d') -> np.ndarray:
    """Signed distance (negative inside) of (..., 3) points to ``mesh``, float64.

    ``backend='open3d'``: ``RaycastingScene.compute_signed_distance`` (the ``labels`` extra:
    pip install 'mmgrasp[labels]'); ``'numpy'``: exact brute force (:func:`closest_distance`,
    the sign by :func:`winding_number`), O(points x triangles): for meshes of a few hundred
    triangles, and the reference the open3d backend is tested against.
    """
    pts = np.asarray(points, np.float64)
    flat = pts.reshape(-1, 3)
    if backend == 'numpy':
        tri = mesh.vertices[mesh.faces]
        sign = np.where(winding_number(flat, tri) > 0.5, -1.0, 1.0)
        return (sign * closest_distance(flat, tri)).reshape(pts.shape[:-1])
    if backend != 'open3d':
        raise ValueError(f"sdf backend {backend!r}: expected 'open3d' or 'numpy'")
    try:
        import open3d as o3d
    except ImportError as err:
        raise ImportError('signed distances of meshes need open3d: pip install '
                          f"'mmgrasp[labels]' (or open3d-cpu), or use the numpy backend for "
                          f'small meshes ({err})') from None
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(mesh.vertices.astype(np.float32)),
                        o3d.core.Tensor(mesh.faces.astype(np.uint32)))
    out = scene.compute_signed_distance(o3d.core.Tensor(flat.astype(np.float32)))
    return out.numpy().astype(np.float64).reshape(pts.shape[:-1])


def closest_distance(points: np.ndarray, tri: np.ndarray, chunk: int = 64) -> np.ndarray:
    """Distance from each point (P, 3) to the nearest triangle of (F, 3, 3), brute force:
    the closest point of each triangle by its Voronoi regions (Ericson, Real-Time Collision
    Detection 5.1.5)."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    ab, ac = b - a, c - a
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        p = points[s:s + chunk, None, :]
        ap, bp, cp = p - a, p - b, p - c
        d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
        d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
        d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
        va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
        with np.errstate(divide='ignore', invalid='ignore'):
            denom = 1.0 / (va + vb + vc)
            v, w = vb * denom, vc * denom
            q = a + v[..., None] * ab + w[..., None] * ac  # inside the face
            t_ab = d1 / (d1 - d3)
            t_ac = d2 / (d2 - d6)
            t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        regions = [  # (mask, closest point), first match wins, Ericson's order
            ((d1 <= 0) & (d2 <= 0), a + 0 * p),
            ((d3 >= 0) & (d4 <= d3), b + 0 * p),
            ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + t_ab[..., None] * ab),
            ((d6 >= 0) & (d5 <= d6), c + 0 * p),
            ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + t_ac[..., None] * ac),
            ((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0), b + t_bc[..., None] * (c - b)),
        ]
        done = np.zeros(q.shape[:2], bool)
        for mask, point in regions:
            take = mask & ~done
            q = np.where(take[..., None], point, q)
            done |= take
        out[s:s + chunk] = np.linalg.norm(q - p, axis=-1).min(1)
    return out


def winding_number(points: np.ndarray, tri: np.ndarray, chunk: int = 64) -> np.ndarray:
    """Generalised winding number (Van Oosterom-Strackee solid angles / 4 pi)."""
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        r = tri[None] - points[s:s + chunk, None, None, :]  # (P, F, 3, 3)
        n = np.linalg.norm(r, axis=-1)
        det = np.einsum('pfi,pfi->pf', r[:, :, 0], np.cross(r[:, :, 1], r[:, :, 2]))
        dots = [np.einsum('pfi,pfi->pf', r[:, :, i], r[:, :, j]) for i, j in ((1, 2), (0, 2),
                                                                             (0, 1))]
        den = n[..., 0] * n[..., 1] * n[..., 2] + dots[0] * n[..., 0] + dots[1] * n[..., 1] \
            + dots[2] * n[..., 2]
        out[s:s + chunk] = (2 * np.arctan2(det, den)).sum(1) / (4 * np.pi)
    return out
