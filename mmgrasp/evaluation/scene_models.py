"""The scene models GraspNet's evaluation reads: annotations, model points and SDFs (the
annotation and PLY parsers are :mod:`mmgrasp.datasets.model_files`'s).

``scenes/scene_%04d/<camera>/annotations/%04d.xml`` gives each frame's objects (id, name, path,
translation, w x y z quaternion); ``models/%03d/nontextured.ply`` their vertices, downsampled
at 8 mm as graspnetAPI does, and ``models/%03d/textured.sdf`` their dexnet SDFs. A process keeps
what it parsed (LRU, keyed by each file's path, size and modification time). The processes of
one parallel evaluation also share it through a folder (:func:`share_parsed_models`): each text
file is parsed by one of them and the others load the
arrays, so reading the models does not cost every process the whole parse.
"""
from __future__ import annotations

import functools
import hashlib
import os
from typing import Callable, Dict, List, Optional

import numpy as np

from mmgrasp.datasets.model_files import read_annotation, read_ply_points  # noqa: F401
from mmgrasp.geometry import SignedDistanceField, parse_dexnet_sdf, voxel_downsample

MODEL_VOXEL = 0.008
_shared_folder: Optional[str] = None


def share_parsed_models(folder: Optional[str]) -> None:
    """Parsed models go to, and come from, ``folder`` (None: this process parses what it reads).

    Files are named by the model file's path, size and modification time and written under a
    temporary name first, so a process never loads a half-written or outdated one."""
    global _shared_folder
    _shared_folder = folder


def _shared(path: str, parse: Callable[[], Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """``parse()`` of ``path``, through the shared folder when there is one."""
    if _shared_folder is None:
        return parse()
    st = os.stat(path)
    key = hashlib.sha1(f'{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}'.encode())
    shared = os.path.join(_shared_folder, key.hexdigest()[:24] + '.npz')
    if os.path.exists(shared):
        with np.load(shared) as arrays:
            return {k: arrays[k] for k in arrays.files}
    arrays = parse()
    tmp = f'{shared}.tmp{os.getpid()}.npz'
    np.savez(tmp, **arrays)
    os.replace(tmp, shared)
    return arrays


def _version(path: str) -> tuple:
    """What names one version of a model file: a file rewritten under the same path (another
    size or modification time) is parsed again, never served from the old parse."""
    st = os.stat(path)
    return path, st.st_size, st.st_mtime_ns


def cached_model_points(path: str) -> np.ndarray:
    """The model points of a PLY file, 8 mm voxel-sampled, parsed once per file version."""
    return _model_points_of(*_version(path))


def cached_sdf(path: str) -> SignedDistanceField:
    """The dexnet SDF of a ``.sdf`` file, parsed once per file version."""
    return _sdf_of(*_version(path))


@functools.lru_cache(maxsize=256)
def _model_points_of(path: str, size: int, mtime_ns: int) -> np.ndarray:
    return _shared(path, lambda: {'points': voxel_downsample(read_ply_points(path),
                                                             MODEL_VOXEL)})['points']


@functools.lru_cache(maxsize=64)
def _sdf_of(path: str, size: int, mtime_ns: int) -> SignedDistanceField:
    arrays = _shared(path, lambda: dict(zip(('data', 'origin', 'resolution'),
                                            parse_dexnet_sdf(path))))
    return SignedDistanceField(arrays['data'], arrays['origin'], float(arrays['resolution']))


def clear_asset_caches() -> None:
    """Forget the models and SDFs read so far (benchmarks time cold reads)."""
    _model_points_of.cache_clear()
    _sdf_of.cache_clear()


def model_dirs(root: str, camera: str, scene: int) -> List[str]:
    """``models/%03d`` folders of a scene's objects, in frame 0's annotation order."""
    cam_dir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
    ids = [i for i, _ in read_annotation(os.path.join(cam_dir, 'annotations', '0000.xml'))]
    return [os.path.join(root, 'models', f'{i:03d}') for i in ids]


def read_model(model_dir: str) -> None:
    """Parse one object's model points and SDF into this process's caches (and the shared
    folder): what a parallel evaluation does first, one object a task."""
    cached_model_points(os.path.join(model_dir, 'nontextured.ply'))
    cached_sdf(os.path.join(model_dir, 'textured.sdf'))


def scene_assets(root: str, camera: str, scene: int, sdf_sample_seed: Optional[int] = None):
    """Object ids (frame 0's annotation order), downsampled model points and SDFs of a scene.

    ``sdf_sample_seed``: draw each SDF's out-of-grid surface sample as dexnet does after
    ``np.random.seed(seed)`` (1000 cells with replacement, objects in order); None uses every
    surface cell.
    """
    dirs = model_dirs(root, camera, scene)
    models, sdfs = [], []
    rs = None if sdf_sample_seed is None else np.random.RandomState(sdf_sample_seed)
    for mdir in dirs:
        models.append(cached_model_points(os.path.join(mdir, 'nontextured.ply')))
        sdf = cached_sdf(os.path.join(mdir, 'textured.sdf'))
        if rs is not None:
            sample = sdf.surface_cells[rs.choice(len(sdf.surface_cells), 1000)]
            sdf = sdf.with_surface_sample(sample)
        sdfs.append(sdf)
    return [int(os.path.basename(d)) for d in dirs], models, sdfs
