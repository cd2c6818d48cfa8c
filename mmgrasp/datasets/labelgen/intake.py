"""Mesh intake: every object mesh is read and checked before any work is done on it.

The labels need a closed surface (inside and outside of the signed distance field), wound one
way (the sign of the volume), enclosing a volume, and in metres (the gripper is 10 cm wide; the
SDF grid is 2 mm: a mesh in millimetres asks for terabytes). A mesh that fails is refused with
ONE line naming the file and every problem found, and the run writes nothing for it.

Meshes are read with trimesh (OBJ, PLY, STL; the ``labels`` extra); vertices that differ only
in texture coordinates or normals are merged first, as OBJ exporters split them at seams.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from .mesh import TriangleMesh, write_mesh_obj

MESH_EXTENSIONS = ('.obj', '.ply', '.stl')
#: largest extent accepted (metres): beyond it the object is no graspable object, or not in metres
MAX_EXTENT = 1.0
#: smallest largest-extent accepted (metres)
MIN_EXTENT = 0.005


class IntakeResult(NamedTuple):
    accepted: dict  # {object id: TriangleMesh (scaled, metres)}
    refused: list  # one line per refused mesh


def _load(path: str):
    try:
        import trimesh
    except ImportError as err:
        raise ImportError("reading meshes needs trimesh: pip install 'mmgrasp[labels]' "
                          f'({err})') from None
    mesh = trimesh.load(path, force='mesh', process=False)
    if not isinstance(mesh, trimesh.Trimesh):
        raise ValueError('no triangles')
    mesh.merge_vertices(merge_tex=True, merge_norm=True)
    return mesh


def check_mesh(path: str | os.PathLike, scale: float = 1.0) -> TriangleMesh:
    """The mesh of ``path`` times ``scale`` (metres) when it can be labelled; else ValueError
    with one line naming the file and what is wrong."""
    path = os.fspath(path)
    if not path.lower().endswith(MESH_EXTENSIONS):
        raise ValueError(f'{path}: expected a {", ".join(MESH_EXTENSIONS)} mesh')
    try:
        mesh = _load(path)
    except ImportError:
        raise
    except Exception as err:  # noqa: BLE001 - the readers raise many kinds; one line
        raise ValueError(f'{path}: not a readable mesh ({type(err).__name__}: '
                         f'{str(err).splitlines()[0] if str(err) else ""})') from None
    if len(mesh.faces) == 0:
        raise ValueError(f'{path}: no triangles (a point cloud is not a mesh)')
    vertices = np.asarray(mesh.vertices, np.float64) * scale
    if not np.isfinite(vertices).all():
        raise ValueError(f'{path}: vertices that are not finite')
    problems = []
    extent = float((vertices.max(0) - vertices.min(0)).max())
    size = f'{extent:.4g} m across (scale {scale:g})'
    if extent > MAX_EXTENT:
        problems.append(f'{size}, larger than {MAX_EXTENT:g} m: is it in millimetres? '
                        'use --scale 0.001')
    elif extent < MIN_EXTENT:
        problems.append(f'{size}, smaller than {MIN_EXTENT * 1000:g} mm: is it in metres? '
                        'set --scale to its unit in metres')
    edges = np.sort(mesh.edges, axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    if (counts == 1).any():
        problems.append(f'open: {int((counts == 1).sum())} edges border one face only '
                        '(a closed, watertight surface is needed)')
    if (counts > 2).any():
        problems.append(f'not manifold: {int((counts > 2).sum())} edges shared by more than '
                        'two faces')
    closed = not (counts != 2).any()
    if closed and not mesh.is_winding_consistent:
        problems.append('faces wound inconsistently (some normals point in)')
    elif closed:
        volume = float(mesh.volume) * scale ** 3
        if not volume > 0:
            problems.append(f'volume {volume:.3g} m^3: inside out (faces wound inward)'
                            if volume < 0 else 'encloses no volume')
    if problems:
        raise ValueError(f'{path}: ' + '; '.join(problems))
    return TriangleMesh(vertices, np.asarray(mesh.faces, np.int64))


def intake_meshes(meshes: dict, scale: float = 1.0) -> IntakeResult:
    """:func:`check_mesh` on each {id: path}; the refused ones as one line each."""
    accepted, refused = {}, []
    for obj, path in meshes.items():
        try:
            accepted[obj] = check_mesh(path, scale)
        except ValueError as err:
            refused.append(f'refused object {obj:03d}: {err}')
    return IntakeResult(accepted, refused)



def labelling_path(obj: int, path: str, mesh: TriangleMesh, root: str,
                   scale: float = 1.0) -> str:
    """The mesh file :func:`~.objects.label_mesh_file` reads for an accepted mesh: the source
    itself where :func:`~.mesh.read_mesh` reads it as checked (an OBJ or PLY at scale 1), else
    the checked mesh written as ``models/%03d/textured.obj`` under ``root``."""
    if scale == 1.0 and path.lower().endswith(('.obj', '.ply')):
        return path
    model_dir = os.path.join(root, 'models', f'{obj:03d}')
    os.makedirs(model_dir, exist_ok=True)
    target = os.path.join(model_dir, 'textured.obj')
    write_mesh_obj(target, mesh)
    return target
