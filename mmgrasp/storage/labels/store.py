"""The label store: GraspNet-1Billion's npz labels converted once into memory-mappable ``.npy``.

Layout (all under one store folder; the manifest describes it, the code that reads grids only
needs the paths, shapes and dtypes below)::

    manifest.json                       format version, grid, dtypes, bit order, source fingerprints
    objects/%03d/points.npy             (N, 3) float32 label points, model frame
                 scores.npy             (N, V, A, D) float32 friction μ as stored (−1 infeasible)
                 widths.npy             (N, V, A, D) float32 gripper width (offsets[..., 2])
                 self_collision.npy     (N, ceil(V·A·D / 8)) uint8, np.packbits rows
                 tolerance.npy          (N, V, A, D) uint8 level, when a tolerance file exists
                 tolerance_radii.npy    (L,) float32 radius of each level (bit-exact source values)
                 score_codes.npy        (N, V, A, D) uint8 μ code, when ≤ 255 distinct values
                 score_values.npy       (C,) float32 value of each code (exact bit patterns)
                 view_*.npy             (N, V) per-view summaries of raw μ (collision='none')
    scenes/%04d/collision.npy           (R, ceil(V·A·D / 8)) uint8 scene-collision rows of every
                                        object instance of the scene, in cls_indexes order
                view_*.npy              (R, V) per-view summaries of μ after scene collisions,
                                        row for row with collision.npy (see .view_summaries)

Bit-packed rows use ``np.packbits(..., bitorder='little')`` over the flattened (V, A, D) cells:
cell c lives in byte c // 8, bit c % 8 counted from the least significant bit.

The store of a dataset root and tolerance folder lives in one cache folder (the key hashes both
resolved paths, links followed) as versions (see :mod:`.derived_assets`): a stale store is rebuilt
as a new version beside the old one, which jobs still reading it keep. Every open checks the
current version against its sources' (size, mtime): grasp labels, tolerance files (also ones that
appeared), collision labels and each scene's instance list (the reader's ``scene_source_files``:
GraspNet-1Billion frame 0's meta and object_id_list.txt, GraspClutter6D scene_gt.json). A stale
or foreign store is rebuilt (``build=True``) or refused with a message that says how to rebuild
it.
"""
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np
from mmengine.logging import print_log

from mmgrasp.geometry.gripper import (GripperLike, build_gripper, check_same_gripper,
                                      read_gripper_file)
from . import summaries
from ..derived_assets import MANIFEST, VersionHold, open_or_build, read_manifest
from ..derived_assets import save_array as _save  # one name, patched by the store tests
from ..remote.sources import RemoteReadError
from ..remote.store import RemoteStoreError, open_remote_store
from ..secrets import secret_paths
from ..source import DatasetFileError, GraspSource

FORMAT_VERSION = 2
COLLISION_BITORDER = 'little'


class LabelStoreError(RuntimeError):
    """A label store that cannot be used as it is (stale, foreign, corrupt or not writable)."""


def packed_row_bytes(grid: Tuple[int, int, int]) -> int:
    """Bytes of one bit-packed (V, A, D) row."""
    return (int(np.prod(grid)) + 7) // 8


def pack_rows(mask: np.ndarray) -> np.ndarray:
    """(N, V, A, D) bool -> (N, ceil(V·A·D/8)) uint8, the store's bit order."""
    return np.packbits(mask.reshape(len(mask), -1), axis=1, bitorder=COLLISION_BITORDER)


def unpack_rows(packed: np.ndarray, grid: Tuple[int, int, int]) -> np.ndarray:
    """Inverse of :func:`pack_rows`: (N, nbytes) uint8 -> (N, V, A, D) bool."""
    cells = int(np.prod(grid))
    bits = np.unpackbits(packed, axis=1, count=cells, bitorder=COLLISION_BITORDER)
    return bits.view(bool).reshape(len(packed), *grid)


def zero_where(values: np.ndarray, mask: np.ndarray) -> None:
    """``values[mask] = 0`` in place for float32 grids, as a multiply of the bit patterns by
    ``~mask``: +0.0 bit for bit (also where μ is −1), and about ten times faster than boolean
    assignment, which branches per cell."""
    bits = values.view(np.uint32)
    np.multiply(bits, ~mask, out=bits)


def default_cache_dir() -> str:
    """``$MMGRASP_CACHE``, else ``$XDG_CACHE_HOME/mmgrasp`` (``~/.cache/mmgrasp``)."""
    if os.environ.get('MMGRASP_CACHE'):
        return os.environ['MMGRASP_CACHE']
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'mmgrasp')


def resolved_tolerance_dir(root: str, tolerance_dir: Optional[str] = None) -> str:
    """The tolerance folder of a root (default ``<root>/tolerance``), links resolved."""
    return os.path.realpath(tolerance_dir or os.path.join(os.path.abspath(root), 'tolerance'))


def resolved_root(root: str) -> str:
    """A dataset root with links resolved: the same dataset reached through a symbolic link
    shares one store (on GraspNet-1Billion a second store would be another 7.5 GiB)."""
    return os.path.realpath(root)


def store_path_for(root: str, cache_dir: Optional[str] = None,
                   tolerance_dir: Optional[str] = None) -> str:
    """Where the store of dataset ``root`` lives: one folder per resolved root path and resolved
    tolerance folder."""
    root = resolved_root(root)
    key = hashlib.sha1(f'{root}|{resolved_tolerance_dir(root, tolerance_dir)}'.encode()
                       ).hexdigest()[:10]
    name = f'labels-{os.path.basename(root.rstrip(os.sep)) or "root"}-{key}'
    return os.path.join(cache_dir or default_cache_dir(), name)


@dataclass(frozen=True)
class ObjectEntry:
    num_points: int
    has_tolerance: bool
    score_codes: bool = False  # μ codes and per-view summaries exist (matched-cell reads)


@dataclass(frozen=True)
class SceneEntry:
    object_ids: Tuple[int, ...]  # cls_indexes order, 0-based
    row_offsets: Tuple[int, ...]  # first row of each instance in scenes/%04d/collision.npy


class LabelStore:
    """An opened, validated store. Cheap: reads the manifest only; label points on demand."""

    def __init__(self, path: str, manifest: dict, hold: Optional[VersionHold] = None,
                 local_path: Optional[str] = None):
        self.path = path  # a folder, or the URL of a published store (read by mmgrasp.storage)
        self.local_path = local_path or path  # where the small files (points, radii) are read
        self.manifest = manifest
        self.hold = hold  # keeps this version on disk while the store is in use
        self.grid: Tuple[int, int, int] = tuple(manifest['grid'])
        self.objects: Dict[int, ObjectEntry] = {
            int(k): ObjectEntry(v['num_points'], v['has_tolerance'], v.get('score_codes', False))
            for k, v in manifest['objects'].items()}
        self.scenes: Dict[int, SceneEntry] = {
            int(k): SceneEntry(tuple(v['object_ids']), tuple(v['row_offsets']))
            for k, v in manifest['scenes'].items()}
        # scenes on disk left out at build (--skip-missing-collision): scene -> missing file
        self.skipped_scenes: Dict[int, str] = {
            int(k): os.path.join(str(manifest.get('root', '')), str(v))
            for k, v in manifest.get('skipped_scenes', {}).items()}
        self._points: Dict[int, np.ndarray] = {}
        self._radii: Dict[int, np.ndarray] = {}

    def check_gripper(self, gripper: GripperLike, where: str) -> None:
        """Refuse ``gripper`` (the one ``where`` is configured with) unless the labels were
        made for it: their ``grasp_label/gripper.json`` (written by
        ``tools/data/generate_grasp_labels.py``), or GraspNet's gripper without one."""
        made = self.manifest.get('gripper')
        source = (f'the labels of {self.manifest.get("root", self.path)} '
                  + ('(grasp_label/gripper.json)' if made else
                     "(no grasp_label/gripper.json: GraspNet-1Billion's gripper)"))
        check_same_gripper(build_gripper(gripper), where, build_gripper(made), source)

    # Paths are plain strings: Path objects cost a dozen lstat calls per open on network FS.
    def object_file(self, obj: int, name: str) -> str:
        if obj not in self.objects:
            raise KeyError(f'object {obj} is not in label store {self.path}')
        return f'{self.path}/objects/{obj:03d}/{name}.npy'

    def collision_file(self, scene: int) -> str:
        if scene not in self.scenes:
            raise KeyError(self.missing_scene_reason(scene))
        return f'{self.path}/scenes/{scene:04d}/collision.npy'

    def points(self, obj: int) -> np.ndarray:
        """(N, 3) float32 label points of an object (small; read once and kept)."""
        if obj not in self._points:
            self.object_file(obj, 'points')  # KeyError naming the store
            self._points[obj] = np.load(f'{self.local_path}/objects/{obj:03d}/points.npy')
        return self._points[obj]

    def tolerance_radii(self, obj: int) -> np.ndarray:
        if obj not in self._radii:
            if not self.objects[obj].has_tolerance:
                raise KeyError(f'object {obj} has no tolerance labels in {self.path}: generate '
                               f'%03d_tolerance.npy files and rebuild the store')
            self._radii[obj] = np.load(f'{self.local_path}/objects/{obj:03d}/tolerance_radii.npy')
        return self._radii[obj]

    def missing_scene_reason(self, scene: int) -> str:
        """Why the store holds no collision rows of ``scene``."""
        if scene in self.skipped_scenes:
            return (f'scene {scene} was left out of the label store {self.path} when it was '
                    f'built with --skip-missing-collision: its collision label file '
                    f'{self.skipped_scenes[scene]} is missing; restore the file and rebuild, or '
                    f'drop the scene from the split')
        return (f'scene {scene} is not in label store {self.path} (it has '
                f'{sorted(self.scenes)})')

    def collision_row_offset(self, scene: int, instance: int) -> int:
        return self.scenes[scene].row_offsets[instance]


# ---------------------------------------------------------------------------------- sources
def gripper_file(reader: GraspSource) -> str:
    """``grasp_label/gripper.json``: the gripper generated labels were made for."""
    return os.path.join(os.path.dirname(reader.grasp_label_path(0)), 'gripper.json')


def _source_files(reader: GraspSource, scenes: Iterable[int],
                  objects: Iterable[int]) -> List[str]:
    files = [gripper_file(reader)] if os.path.isfile(gripper_file(reader)) else []
    for obj in objects:
        files.append(reader.grasp_label_path(obj))
        if os.path.isfile(reader.tolerance_path(obj)):
            files.append(reader.tolerance_path(obj))
    for scene in scenes:
        files.extend(reader.scene_source_files(scene))
    return files


def _fingerprint(path: str) -> List[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def stale_reason(manifest: dict, reader: GraspSource) -> Optional[str]:
    """Why a store may not be used for ``reader``'s root and tolerance folder (None when it
    may)."""
    root, tolerance_dir = reader.root, reader.tolerance_dir
    if manifest.get('format_version') != FORMAT_VERSION:
        return (f'format version {manifest.get("format_version")}, this mmgrasp reads '
                f'{FORMAT_VERSION}')
    if manifest.get('root') != resolved_root(root):
        return f'it was built from {manifest.get("root")}, not {resolved_root(root)}'
    tolerance = resolved_tolerance_dir(root, tolerance_dir)
    if manifest.get('tolerance_dir') != tolerance:
        return (f'it was built with tolerance folder {manifest.get("tolerance_dir")}, not '
                f'{tolerance}')
    if os.path.isfile(gripper_file(reader)) != (manifest.get('gripper') is not None):
        return f'{gripper_file(reader)} appeared or disappeared since the store was built'
    for key, entry in manifest['objects'].items():
        path = reader.tolerance_path(int(key))
        if not entry['has_tolerance'] and os.path.exists(path):
            return f'tolerance file {path} appeared since the store was built'
    for rel, fingerprint in manifest['sources'].items():
        path = os.path.join(manifest['root'], rel) if not os.path.isabs(rel) else rel
        if not os.path.exists(path):
            return f'source {path} no longer exists'
        if _fingerprint(path) != fingerprint:
            return f'source {path} changed since the store was built (size or mtime differ)'
    if set(manifest['scenes']) != {f'{s:04d}' for s in reader.collision_scenes()}:
        return 'the set of scenes with collision labels changed'
    skipped = set(manifest.get('skipped_scenes', {}))
    unrecorded = [path for s, path in missing_collision_files(reader).items()
                  if f'{s:04d}' not in skipped]
    if unrecorded:
        return f'collision label file {unrecorded[0]} is missing'
    return None


def missing_collision_files(reader: GraspSource) -> Dict[int, str]:
    """Scenes on disk (the reader's ``present_scenes``) without a collision label file, with
    the path that file should have: the store holds no rows for them, so a training frame of
    such a scene could not be labelled."""
    have = set(reader.collision_scenes())
    return {s: reader.collision_label_path(s) for s in reader.present_scenes() if s not in have}


def _read_manifest(store_path: str) -> Optional[dict]:
    """The manifest of a store version (None when it has none)."""
    return read_manifest(store_path, LabelStoreError)


# ---------------------------------------------------------------------------------- build
def _tolerance_levels(path: str, tolerance: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """uint8 levels and the float32 radius of each, exact to the bit (compared as uint32)."""
    bits = np.ascontiguousarray(tolerance, dtype=np.float32).view(np.uint32)
    # distinct values by hashing, then each cell's rank among them: the inverse np.unique would
    # give, without its sort of every cell (most of a store build's time)
    radii_bits = np.unique(bits)
    if len(radii_bits) > 256:
        raise DatasetFileError(path, f'{len(radii_bits)} distinct tolerance values; the store '
                                     f'keeps at most 256 levels')
    levels = np.searchsorted(radii_bits, bits)
    return levels.reshape(tolerance.shape).astype(np.uint8), radii_bits.view(np.float32)


def _build_into(tmp: str, reader: GraspSource, scenes: List[int]) -> dict:
    metas = {scene: reader.scene_meta(scene) for scene in scenes}
    for scene, meta in metas.items():  # frames read later are checked against the same list
        reader.check_frame_objects(scene, meta.object_ids, reader.scene_meta_path(scene))
    objects = sorted({int(o) for m in metas.values() for o in m.object_ids})
    grid = None
    manifest_objects, num_points, tables = {}, {}, {}
    t0 = time.time()
    for i, obj in enumerate(objects):
        label = reader.load_grasp_label(obj, grid)
        grid = grid or tuple(label['scores'].shape[1:])
        folder = os.path.join(tmp, 'objects', f'{obj:03d}')
        os.makedirs(folder)
        _save(os.path.join(folder, 'points.npy'), label['points'])
        _save(os.path.join(folder, 'scores.npy'), label['scores'])
        _save(os.path.join(folder, 'widths.npy'), label['widths'])
        _save(os.path.join(folder, 'self_collision.npy'), pack_rows(label['self_collision']))
        table = _save_score_codes(folder, label, grid)
        if table is not None:
            tables[obj] = table
        tolerance = reader.load_tolerance(obj)
        if tolerance is not None:
            if tolerance.shape != label['scores'].shape:
                raise DatasetFileError(reader.tolerance_path(obj),
                                       f'shape {tolerance.shape}, expected '
                                       f'{label["scores"].shape} like its grasp label')
            levels, radii = _tolerance_levels(reader.tolerance_path(obj), tolerance)
            _save(os.path.join(folder, 'tolerance.npy'), levels)
            _save(os.path.join(folder, 'tolerance_radii.npy'), radii)
        num_points[obj] = len(label['points'])
        manifest_objects[f'{obj:03d}'] = dict(num_points=num_points[obj],
                                              has_tolerance=tolerance is not None,
                                              score_codes=table is not None)
        del label, tolerance
        print_log(f'label store: object {obj:03d} ({i + 1}/{len(objects)}, '
                  f'{num_points[obj]} points, '
                  f'{"μ codes and view summaries" if table is not None else "float32 μ only"}'
                  f', {time.time() - t0:.1f}s)', logger='current')
    manifest_scenes = {}
    for i, scene in enumerate(scenes):
        masks = reader.load_collision(scene, metas[scene], num_points, grid)
        folder = os.path.join(tmp, 'scenes', f'{scene:04d}')
        os.makedirs(folder)
        rows = np.concatenate([pack_rows(m) for m in masks]) if masks else \
            np.zeros((0, packed_row_bytes(grid)), np.uint8)
        _save(os.path.join(folder, 'collision.npy'), rows)
        if tables:
            _save_scene_summaries(tmp, folder, metas[scene].object_ids, masks, tables, grid)
        offsets = np.concatenate([[0], np.cumsum([len(m) for m in masks])[:-1]]).astype(int)
        manifest_scenes[f'{scene:04d}'] = dict(
            object_ids=[int(o) for o in metas[scene].object_ids],
            row_offsets=[int(o) for o in offsets[:len(masks)]])
        print_log(f'label store: scene {scene:04d} collision'
                  f'{" and view summaries" if tables else ""} ({i + 1}/{len(scenes)}, '
                  f'{time.time() - t0:.1f}s)', logger='current')
    sources = {}
    for path in _source_files(reader, scenes, objects):
        sources[os.path.relpath(path, reader.root)] = _fingerprint(path)
    return dict(format_version=FORMAT_VERSION, root=resolved_root(reader.root),
                tolerance_dir=os.path.realpath(reader.tolerance_dir),
                grid=list(grid or (0, 0, 0)),
                collision_bitorder=COLLISION_BITORDER,
                dtypes=dict(points='float32', scores='float32', widths='float32',
                            self_collision='uint8 packed', tolerance='uint8 level',
                            collision='uint8 packed'),
                view_summaries=dict(view_max_mu=summaries.SUMMARY_VIEW_MAX_MU,
                                    max_width=summaries.SUMMARY_MAX_WIDTH),
                objects=manifest_objects, scenes=manifest_scenes, sources=sources,
                gripper=read_gripper_file(gripper_file(reader)).to_dict()
                if os.path.isfile(gripper_file(reader)) else None)


def _save_score_codes(folder: str, label: dict, grid: Tuple[int, int, int]
                      ) -> Optional[np.ndarray]:
    """μ codes, their value table and the raw per-view summaries of one object; None (and
    nothing written) when its μ take more than 255 values: it keeps float32 scores only."""
    table = summaries.score_value_table(label['scores']) \
        if summaries.summaries_supported(grid) else None
    if table is not None:
        _save(os.path.join(folder, 'score_codes.npy'),
              summaries.encode_scores(label['scores'], table))
        _save(os.path.join(folder, 'score_values.npy'), table)
        summaries.save_summaries(
            folder, summaries.view_summaries(label['scores'], label['widths'], table), _save)
    return table


def _save_scene_summaries(tmp: str, folder: str, object_ids, masks, tables: dict,
                          grid: Tuple[int, int, int]) -> None:
    """Per-view summaries of every instance's μ with its scene collisions applied, row for row
    with the scene's collision file (rows of objects without μ codes stay 0: never read)."""
    parts = []
    for obj, mask in zip(object_ids, masks):
        obj = int(obj)
        if obj not in tables:
            parts.append({name: np.zeros((len(mask), grid[0]), dtype)
                          for name, dtype in summaries.SUMMARY_DTYPES.items()})
            continue
        source = os.path.join(tmp, 'objects', f'{obj:03d}')
        scores = np.load(os.path.join(source, 'scores.npy'), mmap_mode='r')
        widths = np.load(os.path.join(source, 'widths.npy'), mmap_mode='r')
        parts.append(summaries.view_summaries(scores, widths, tables[obj], collided=mask))
    if parts:
        summaries.save_summaries(folder, {name: np.concatenate([p[name] for p in parts])
                                          for name in parts[0]}, _save)


def build_label_store(reader: GraspSource, cache_dir: Optional[str] = None,
                      force: bool = False, skip_missing_collision: bool = False) -> LabelStore:
    """Build (or rebuild, with ``force``) the store of ``reader``'s root and tolerance folder as
    a new version (see :mod:`.derived_assets`) unless an up-to-date one exists, and return it
    opened."""
    return open_label_store(reader, cache_dir, build=True, force=force,
                            skip_missing_collision=skip_missing_collision)


def open_label_store(reader: GraspSource, cache_dir: Optional[str] = None, build: bool = True,
                     force: bool = False, skip_missing_collision: bool = False) -> LabelStore:
    """Open the store of ``reader``'s root and tolerance folder (a ``GraspNetReader``, made
    before any write, so a bad root fails first); build it first when missing or stale and
    ``build`` is set.

    A scene on disk without its collision label file stops the build naming that file; with
    ``skip_missing_collision`` the scene is left out with a warning and recorded in the
    manifest (``skipped_scenes``), and a training frame of it is refused naming the file.
    """
    root, tolerance_dir = reader.root, reader.tolerance_dir
    store = store_path_for(root, cache_dir, tolerance_dir)

    def build_into(tmp: str) -> dict:
        scenes = reader.collision_scenes()
        if not scenes:
            raise DatasetFileError(os.path.join(reader.root, 'collision_label'),
                                   'no collision label file found')
        missing = missing_collision_files(reader)
        if missing and not skip_missing_collision:
            first, path = next(iter(missing.items()))
            others = [f'scene {s}' for s in missing if s != first]
            raise DatasetFileError(
                path, f'file not found: scene {first} is on disk but has no collision labels'
                      f'{" (nor " + ", ".join(others) + ")" if others else ""}; restore it, or '
                      f'build with `python tools/data/build_label_store.py '
                      f'{os.path.abspath(root)} --skip-missing-collision` to leave such scenes '
                      f'out of the store (their training frames are then refused)')
        for scene, path in missing.items():
            print_log(f'label store: scene {scene} SKIPPED: its collision label file {path} is '
                      f'missing (--skip-missing-collision); training refuses its frames',
                      logger='current', level=logging.WARNING)
        manifest = _build_into(tmp, reader, scenes)
        manifest['skipped_scenes'] = {f'{s:04d}': os.path.relpath(p, reader.root)
                                      for s, p in missing.items()}
        return manifest

    custom_tolerance = resolved_tolerance_dir(root, tolerance_dir) != resolved_tolerance_dir(root)
    hint = (f'Rebuild it with `python tools/data/build_label_store.py {os.path.abspath(root)}'
            f'{" --cache " + cache_dir if cache_dir else ""}'
            f'{" --tolerance-dir " + tolerance_dir if custom_tolerance else ""}`')
    return open_or_build(store, 'label store', LabelStoreError, _read_manifest,
                         lambda manifest: stale_reason(manifest, reader),
                         build_into, LabelStore, build=build, force=force, rebuild_hint=hint)


def open_remote_label_store(url: str, cache_dir: Optional[str] = None,
                            options: Optional[dict] = None) -> LabelStore:
    """Open the store published at ``url`` (``tools/data/build_label_store.py --upload``).

    The training process reads its manifest and copies the small files loader workers read
    (label points, tolerance radii) into a local mirror under ``cache_dir``; grids are read
    by URL in the model's gathers (see :mod:`mmgrasp.storage.remote.store`). Inside a loader
    worker the store opens from that mirror alone and never touches the network.

    Args:
        url: the published root (or one version folder of it): s3://, gs://, az://, http(s)://,
            file://.
        cache_dir: where the block cache and the mirror live (default ``$MMGRASP_CACHE``).
        options: :class:`~mmgrasp.storage.RemoteOptions` fields, and ``storage_options`` for
            the object store (endpoint, region; never credentials: these come from the
            environment or the library's own configuration, see :mod:`mmgrasp.storage.secrets`).
    """
    from torch.utils.data import get_worker_info  # torch only where a remote store opens
    options = dict(options or {})
    storage_options = options.pop('storage_options', None)
    secret = secret_paths(dict(storage_options=storage_options or {}))
    if secret:
        raise LabelStoreError(
            f'remote label store {url}: {", ".join(secret)} looks like a credential (a secret or '
            f'unknown obstore configuration key, see mmgrasp.storage.secrets); a config is '
            f'logged, dumped into the work dir and stored in every checkpoint, so credentials '
            f'stay out of it: set them in the environment (e.g. AWS_ACCESS_KEY_ID, '
            f'AWS_SECRET_ACCESS_KEY, AWS_PROFILE) or the library\'s own configuration '
            f'(~/.aws/credentials, GOOGLE_APPLICATION_CREDENTIALS)')
    try:
        remote = open_remote_store(url, cache_dir or default_cache_dir(), options,
                                   storage_options, offline=get_worker_info() is not None)
    except (RemoteStoreError, RemoteReadError) as exc:
        raise LabelStoreError(f'remote label store {url}: {exc}') from exc
    manifest = remote.manifest
    if manifest.get('format_version') != FORMAT_VERSION:
        raise LabelStoreError(f'remote label store {remote.url}: format version '
                              f'{manifest.get("format_version")}, this mmgrasp reads '
                              f'{FORMAT_VERSION}; publish a store built by this version')
    return LabelStore(remote.url, manifest, local_path=remote.mirror)
