"""One object of a generated dataset: its model files (what the evaluator reads) and its grasp
label file, each written through a temporary name.

``models/%03d/``:

- ``textured.obj``: the mesh (dexnet's loader reads it next to the SDF), unless one exists;
- ``textured.sdf``: dexnet's text SDF of the mesh on a grid (``resolution``, 12 mm margin),
  with the synthetic writer's curvature factor (``curved_sdf_grid``: dexnet's contact search
  finds no zero crossing on an SDF that is linear along the jaw line, as an exact SDF is near
  a flat face); the grasp labels are computed on this very field;
- ``nontextured.ply``: dense surface points (2.5 mm apart), unless one exists; the evaluator
  reads its vertices and samples them at 8 mm, and so does the self-collision test of the
  labels.
"""
from __future__ import annotations

import concurrent.futures as cf
import itertools
import json
import multiprocessing as mp
import os
import shutil
import time
from typing import Callable, Optional

import numpy as np
import torch

from mmgrasp.geometry import (GRASPNET_GRIPPER, Gripper, SignedDistanceField, read_dexnet_sdf,
                              voxel_downsample, write_dexnet_sdf)
from ..synthetic.boxes import PLY_SPACING, SDF_RESOLUTION, curved_sdf_grid
from ..synthetic.scene import EVAL_VOXEL
from .mesh import (TriangleMesh, label_points, mesh_signed_distance, read_mesh, sample_surface,
                   surface_area, write_mesh_obj)
from .object_labels import BYTES_PER_CELL, object_grasp_labels

#: GraspNet-1Billion's label point spacing is not published; 5 mm voxels by default
LABEL_VOXEL = 0.005


def _write_points_ply(path: str, points: np.ndarray) -> None:
    pts = np.asarray(points, '<f4')
    head = '\n'.join(['ply', 'format binary_little_endian 1.0', f'element vertex {len(pts)}',
                      'property float x', 'property float y', 'property float z',
                      'end_header']) + '\n'
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'wb') as f:
        f.write(head.encode() + pts.tobytes())
    os.replace(tmp, path)


def find_meshes(models: str) -> dict:
    """{object id: mesh file} of a dataset's ``models/`` folder (subfolders ``%03d/`` holding
    ``textured.obj``, else a ``.ply`` with faces, another ``.obj`` or an ``.stl``) or of a folder
    of mesh files (ids from the leading digits of the names when every name has them, else 0, 1, ... in
    sorted order). Raises ValueError naming the folder when it holds no mesh."""
    if not os.path.isdir(models):
        raise ValueError(f'{models}: not a folder of meshes or of models/%03d/ folders')
    entries = sorted(os.listdir(models))
    folders = [e for e in entries if e.isdigit() and os.path.isdir(os.path.join(models, e))]
    found = {}
    if folders:
        for name in folders:
            folder = os.path.join(models, name)
            files = sorted(os.listdir(folder))
            pick = [f for f in files if f == 'textured.obj'] or \
                [f for f in files if f.lower().endswith(('.obj', '.ply', '.stl'))]
            if not pick:
                raise ValueError(f'{folder}: no .obj, .ply or .stl mesh')
            found[int(name)] = os.path.join(folder, pick[0])
        return found
    meshes = [e for e in entries if e.lower().endswith(('.obj', '.ply', '.stl'))]
    if not meshes:
        raise ValueError(f'{models}: no .obj, .ply or .stl mesh and no models/%03d/ folder')
    digits = [''.join(itertools.takewhile(str.isdigit, m)) for m in meshes]
    if all(digits) and len(set(map(int, digits))) == len(digits):
        return {int(d): os.path.join(models, m) for d, m in zip(digits, meshes)}
    return {i: os.path.join(models, m) for i, m in enumerate(meshes)}


def write_model_files(mesh: TriangleMesh, model_dir: str, resolution: float = SDF_RESOLUTION,
                      sdf_backend: Optional[str] = 'open3d', seed: int = 0) -> None:
    """``textured.sdf`` (not with ``sdf_backend=None``) of ``mesh`` in ``model_dir`` (created),
    and ``textured.obj`` and ``nontextured.ply`` where the folder has none (a dataset's own
    files are kept)."""
    os.makedirs(model_dir, exist_ok=True)
    if not os.path.isfile(os.path.join(model_dir, 'textured.obj')):
        write_mesh_obj(os.path.join(model_dir, 'textured.obj'), mesh)
    if sdf_backend is not None:
        values, origin, res = curved_sdf_grid(
            mesh.vertices.min(0), mesh.vertices.max(0),
            lambda pts: mesh_signed_distance(mesh, pts, sdf_backend), resolution)
        write_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'), values, origin, res)
    if not os.path.isfile(os.path.join(model_dir, 'nontextured.ply')):
        count = max(int(np.ceil(surface_area(mesh) / PLY_SPACING ** 2)), 1000)
        _write_points_ply(os.path.join(model_dir, 'nontextured.ply'),
                          sample_surface(mesh, count, seed).astype(np.float32))


def model_points(model_dir: str) -> np.ndarray:
    """The model points as the evaluator samples them: ``nontextured.ply``'s vertices in 8 mm
    voxels."""
    from plyfile import PlyData
    v = PlyData.read(os.path.join(model_dir, 'nontextured.ply'))['vertex']
    pts = np.stack([np.asarray(v[k], np.float64) for k in 'xyz'], 1)
    return voxel_downsample(pts, EVAL_VOXEL)


def save_labels(path: str, labels: dict) -> None:
    """``np.savez`` of the label arrays through a temporary name (atomic)."""
    tmp = f'{path}.tmp{os.getpid()}.npz'
    np.savez(tmp, **labels)
    os.replace(tmp, path)


def generate_object(mesh: TriangleMesh, root: str, obj_id: int,
                    gripper: Gripper = GRASPNET_GRIPPER, voxel_size: float = LABEL_VOXEL,
                    resolution: float = SDF_RESOLUTION, sdf_backend: str = 'open3d',
                    max_cells: int = 200_000, seed: int = 0, dexnet_sdf: Optional[str] = None,
                    progress: Optional[Callable[[int, int], None]] = None,
                    label_backend: str = 'numpy', device: Optional[str] = None) -> dict:
    """Write ``models/%03d/`` and ``grasp_label/%03d_labels.npz`` of one object under ``root``
    and return the label arrays. ``dexnet_sdf``: a dexnet ``textured.sdf`` of the object to use
    as it is (copied, with the ``nontextured.ply`` beside it when there is one) instead of one
    computed from the mesh. ``label_backend``, ``device``: :func:`object_grasp_labels`'s
    ``backend`` and ``device``."""
    model_dir = os.path.join(root, 'models', f'{obj_id:03d}')
    if dexnet_sdf is None:
        write_model_files(mesh, model_dir, resolution, sdf_backend, seed)
    else:
        write_model_files(mesh, model_dir, resolution, None, seed)
        ply = os.path.join(os.path.dirname(dexnet_sdf), 'nontextured.ply')
        for src in [dexnet_sdf] + ([ply] if os.path.isfile(ply) else []):
            target = os.path.join(model_dir, os.path.basename(src))
            if os.path.abspath(src) != os.path.abspath(target):
                shutil.copyfile(src, target + '.tmp')
                os.replace(target + '.tmp', target)
    sdf: SignedDistanceField = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
    points = label_points(mesh, voxel_size, seed)
    labels = object_grasp_labels(sdf, points, model_points(model_dir), gripper,
                                 max_cells=max_cells, progress=progress,
                                 backend=label_backend, device=device)
    os.makedirs(os.path.join(root, 'grasp_label'), exist_ok=True)
    save_labels(os.path.join(root, 'grasp_label', f'{obj_id:03d}_labels.npz'), labels)
    return labels


def label_pool(nproc: int) -> cf.ProcessPoolExecutor:
    """The process pool of the label tools: spawned, not forked (a child forked from a process
    whose torch thread pool already ran hangs in its first parallel region), each process on
    one torch thread (``nproc`` processes share the cores)."""
    return cf.ProcessPoolExecutor(max(1, nproc), mp_context=mp.get_context('spawn'),
                                  initializer=torch.set_num_threads, initargs=(1, ))


def label_mesh_file(obj: int, path: str, root: str, gripper: Gripper, voxel_size: float,
                    resolution: float, sdf_backend: str, max_memory: float, seed: int,
                    use_dexnet_sdf: bool, stamp: dict, label_backend: str = 'numpy',
                    device: Optional[str] = None) -> tuple:
    """One object of ``tools/data/generate_grasp_labels.py`` (a process of its pool):
    :func:`generate_object` on the mesh file, then the ``%03d_labels.json`` stamp that marks it
    done. ``max_memory``: GiB of working memory. Returns (id, points, share of feasible cells,
    seconds)."""
    t0 = time.time()
    mesh = read_mesh(path)
    sdf = os.path.join(os.path.dirname(path), 'textured.sdf')
    max_cells = max(1000, int(max_memory * 2 ** 30 / BYTES_PER_CELL))
    labels = generate_object(mesh, root, obj, gripper, voxel_size, resolution, sdf_backend,
                             max_cells, seed,
                             sdf if use_dexnet_sdf and os.path.isfile(sdf) else None,
                             label_backend=label_backend, device=device)
    out = os.path.join(root, 'grasp_label', f'{obj:03d}_labels.json')
    with open(out + '.tmp', 'w') as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
    os.replace(out + '.tmp', out)
    return obj, len(labels['points']), float((labels['scores'] > 0).mean()), time.time() - t0
