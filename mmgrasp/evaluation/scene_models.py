"""The scene models GraspNet's evaluation reads: annotations, model points and SDFs.

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
import xml.etree.ElementTree as ET
from typing import Callable, Dict, List, Optional

import numpy as np
from plyfile import PlyData, PlyParseError

from mmgrasp.geometry import (SignedDistanceField, parse_dexnet_sdf, quaternion_to_graspnet_pose,
                              voxel_downsample)

MODEL_VOXEL = 0.008
_shared_folder: Optional[str] = None


def read_annotation(path: str) -> List[tuple]:
    """[(object id, float32 4x4 pose model -> camera)] of an annotation XML, in file order."""
    try:
        root = ET.parse(path).getroot()
        out = []
        for obj in root:
            fields = list(obj)
            obj_id = int(fields[0].text)
            translation = [float(v) for v in fields[3].text.split()]
            quaternion = [float(v) for v in fields[4].text.split()]
            if len(translation) != 3 or len(quaternion) != 4:
                raise ValueError(f'object {obj_id}: translation needs 3 numbers and '
                                 'quaternion 4 (w x y z)')
            out.append((obj_id, quaternion_to_graspnet_pose(translation, quaternion)))
    except (ET.ParseError, IndexError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f'{path}: not a GraspNet annotation ({err})') from None
    return out


def _ascii_vertices(path: str) -> Optional[np.ndarray]:
    """(N, 3) float64 vertices of an ASCII PLY, each value parsed as a double from its text as
    open3d's reader (rply's ``strtod``) does, for any property type; None for a binary PLY.

    graspnetAPI reads the models with open3d: a float32 round trip would move points that lie on
    an 8 mm voxel boundary (round-sized models have many) into the next voxel. The body is read as
    whitespace-separated tokens in element order, as rply reads it, so line breaks do not matter.
    """
    with open(path, 'rb') as f:
        if f.readline().strip() != b'ply':
            raise ValueError('no "ply" magic line')
        fmt = f.readline().split()
        if fmt[:1] != [b'format']:
            raise ValueError('no format line')
        if fmt[1:2] != [b'ascii']:
            return None
        elements = []  # [name, count, [is_list per property], [property names]]
        for raw in f:
            words = raw.split()
            if not words or words[0] in (b'comment', b'obj_info'):
                continue
            if words[0] == b'end_header':
                break
            if words[0] == b'element':
                elements.append([words[1], int(words[2]), [], []])
            elif words[0] == b'property' and elements:
                elements[-1][2].append(words[1] == b'list')
                elements[-1][3].append(words[-1].decode())
        else:
            raise ValueError('no end_header')
        tokens = f.read().split()
    pos = 0
    for name, count, lists, props in elements:
        if name == b'vertex':
            if not {'x', 'y', 'z'} <= set(props):
                raise ValueError(f'vertex properties {props} lack x, y or z')
            if any(lists):
                rows, pos = _ascii_rows(tokens, pos, count, lists)
            else:
                rows = tokens[pos:pos + count * len(props)]
                if len(rows) != count * len(props):
                    raise ValueError(f'{count} vertices announced, the file ends before')
                rows = [rows[i::len(props)] for i in range(len(props))]
            return np.array([rows[props.index(a)] for a in 'xyz'], dtype=np.float64).T.copy()
        pos = _ascii_rows(tokens, pos, count, lists)[1] if any(lists) else \
            pos + count * len(props)
    raise KeyError('vertex')


def _ascii_rows(tokens: list, pos: int, count: int, lists: List[bool]) -> tuple:
    """Columns (one token list per property; a list property keeps its first item) of ``count``
    rows of an element with list properties, starting at token ``pos``; and the next position."""
    columns: List[list] = [[] for _ in lists]
    try:
        for _ in range(count):
            for column, is_list in zip(columns, lists):
                if is_list:
                    n = int(tokens[pos])
                    column.append(tokens[pos + 1] if n else b'nan')
                    pos += 1 + n
                else:
                    column.append(tokens[pos])
                    pos += 1
    except IndexError:
        raise ValueError(f'{count} rows announced, the file ends before') from None
    if pos > len(tokens):
        raise ValueError(f'{count} rows announced, the file ends before')
    return columns, pos


def read_ply_points(path: str) -> np.ndarray:
    """(N, 3) float64 vertex positions of a PLY file (faces, if any, are ignored), the values
    graspnetAPI's open3d reader gives: ASCII values parsed as doubles, binary ``float`` values
    exactly (float32 widened)."""
    try:
        ascii_points = _ascii_vertices(path)
        if ascii_points is not None:
            return ascii_points
        vertex = PlyData.read(path)['vertex']
        return np.stack([np.asarray(vertex[a], dtype=np.float64) for a in 'xyz'], axis=1)
    except (KeyError, ValueError, OSError, IndexError, PlyParseError) as err:
        raise ValueError(f'{path}: cannot read PLY vertices ({err})') from None


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
