"""HGGD's per-image grasps as a derived asset of the label store: every frame of one camera,
converted by the rules of :mod:`.hggd`, in a few memory-mapped arrays.

Layout of a version (see :mod:`..derived_assets` for versions, locking and atomic rebuilds)::

    manifest.json        label-store version, camera, options, rules, scene -> [first frame row,
                         frames], per-scene source fingerprints (camera poses and intrinsics,
                         model files)
    frames.npy           (F, 4) int64 scene, frame, first grasp row, end grasp row
    intrinsics.npy       (F, 3, 3) float64 the projection each frame was encoded with
    fingerprints.npy     (F, 2, 2) int64 (size, mtime_ns) of the frame's pose file (GraspNet's
                         annotation XML, GraspClutter6D's scene_gt.json) and depth PNG
    <field>.npy          (R, ...) the rows of every frame, one file per field of
                         ``{ann}_view.npz`` (:data:`.hggd.FIELDS`, the reference's dtypes)

The build is resumable: each scene is converted into ``partial-<key>/scene_%04d.npz`` beside the
versions (written under a temporary name, then renamed), and a build that was killed starts
again from the scenes it had not finished; the version is assembled from those files, and the
folder removed, once every scene is done. Scenes are converted in ``nproc`` processes.
The asset folder sits beside the label store's, named by camera and options.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import resource
import shutil
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
from mmengine.logging import print_log

from mmgrasp.utils.random import frame_rng
from . import hggd
from ..derived_assets import VersionHold, open_or_build, read_manifest, save_array
from ..source import DatasetFileError, GraspSource
from .store import LabelStore, LabelStoreError, open_label_store, unpack_rows

FORMAT_VERSION = 2  # 2: angles through the C library (AVX-512 CPUs wrote other last bits)
PARTIAL_PREFIX = 'partial-'


@dataclass
class HGGDGrasps:
    """One frame's grasps: n rows of the fields of ``{ann}_view.npz`` (memory-mapped slices)
    and the intrinsics they were projected with."""
    centers_2d: np.ndarray  # (n, 2) float64 pixel (x, y)
    opens_2d: np.ndarray  # (n, 2) float64
    thetas_rad: np.ndarray  # (n,) float32
    gammas_rad: np.ndarray  # (n,) float64
    betas_rad: np.ndarray  # (n,) float64
    widths_2d: np.ndarray  # (n,) float32 pixels at the native width
    heights_2d: np.ndarray  # (n,) float32
    scores_from_6d: np.ndarray  # (n,) float32
    object_ids: np.ndarray  # (n,) int32, 0-based
    center_z_depths: np.ndarray  # (n,) float64 millimetres
    intrinsics: np.ndarray  # (3, 3) float64

    def __len__(self) -> int:
        return len(self.object_ids)


def hggd_folder(store: LabelStore, camera: str, seed: int, apply_visibility: bool) -> str:
    """Where the asset of ``store`` for ``camera`` with these options lives."""
    base = os.path.dirname(os.path.abspath(store.path))
    return f'{base}-hggd-{camera}-s{seed}{"-visible" if apply_visibility else ""}'


class HGGDGraspStore:
    """An opened version: frame index and intrinsics in memory, the rows memory-mapped."""

    def __init__(self, path: str, manifest: dict, index: np.ndarray,
                 hold: Optional[VersionHold] = None):
        self.path, self.manifest, self.hold, self.index = path, manifest, hold, index
        self.rows: Dict[Tuple[int, int], Tuple[int, int, int]] = {
            (int(s), int(f)): (i, int(a), int(b)) for i, (s, f, a, b) in enumerate(index)}
        self.intrinsics = np.load(f'{path}/intrinsics.npy')
        self.arrays = {name: np.asarray(np.load(f'{path}/{name}.npy', mmap_mode='r'))
                       for name in hggd.FIELDS}

    def __reduce__(self):  # a pickled store maps its files again (and holds the version)
        return HGGDGraspStore, (self.path, self.manifest, self.index, self.hold)

    @property
    def frames(self) -> List[Tuple[int, int]]:
        """The (scene, frame) pairs it holds, in order."""
        return list(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self, scene: int, frame: int) -> HGGDGrasps:
        if (scene, frame) not in self.rows:
            raise KeyError(f'scene {scene} frame {frame} is not in the HGGD grasps {self.path} '
                           f'({len(self.rows)} frames of scenes '
                           f'{sorted({s for s, _ in self.rows})})')
        row, start, end = self.rows[(scene, frame)]
        return HGGDGrasps(**{name: array[start:end] for name, array in self.arrays.items()},
                          intrinsics=self.intrinsics[row].copy())


# ---------------------------------------------------------------------------------- sources
def _fingerprint(path: str) -> List[int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return [-1, -1]
    return [st.st_size, st.st_mtime_ns]


def _pose_file(reader: GraspSource, scene: int, frame: int) -> str:
    if reader.layout == 'graspnet':
        return reader.annotation_path(scene, frame)
    return reader.frame_path(scene, 'meta', frame)


def _frame_sources(reader: GraspSource, scene: int, frame: int) -> List[str]:
    return [_pose_file(reader, scene, frame), reader.frame_path(scene, 'depth', frame)]


def _scene_sources(reader: GraspSource, store: LabelStore, scene: int) -> Dict[str, list]:
    paths = list(reader.trajectory_files(scene)) + [
        reader.model_points_path(obj) for obj in sorted(set(store.scenes[scene].object_ids))]
    return {os.path.relpath(p, reader.root): _fingerprint(p) for p in paths}


def asset_scenes(reader: GraspSource, store: LabelStore) -> List[int]:
    """Scenes of the camera that have labels in the store."""
    return [s for s in reader.present_scenes() if s in store.scenes]


# ---------------------------------------------------------------------------------- one scene
def _projection(reader: GraspSource, scene: int, frame: int
                ) -> Tuple[np.ndarray, Tuple[int, int], Optional[np.ndarray]]:
    """Intrinsics and image size of the encoding, and the depth image when it was read.

    GraspNet-1Billion's two cameras: the reference's hard-coded intrinsics at 1280 x 720; any
    other camera: the frame's own intrinsics and depth image size."""
    if reader.layout == 'graspnet':
        return (hggd.intrinsics_matrix(*hggd.GRASPNET_INTRINSICS[reader.camera]),
                hggd.GRASPNET_IMAGE_SIZE, None)
    depth = reader.load_depth(scene, frame)
    return (np.asarray(reader.load_meta(scene, frame).intrinsics, np.float64),
            (depth.shape[1], depth.shape[0]), depth)


def _depth_cloud(reader: GraspSource, scene: int, frame: int,
                 depth: Optional[np.ndarray]) -> hggd.DepthCloud:
    """The cloud of the visibility mask: GraspNet's ``camK.npy`` and 1000 units per metre, as
    ``loadScenePointCloud``; other layouts the frame's intrinsics and depth scale."""
    if depth is None:
        depth = reader.load_depth(scene, frame)
    if reader.layout == 'graspnet':
        return hggd.DepthCloud(depth, reader.trajectory(scene).intrinsics, 1000.0)
    meta = reader.load_meta(scene, frame)
    return hggd.DepthCloud(depth, meta.intrinsics, meta.factor_depth)


class SceneLabels:
    """A scene's label grids (collision rows unpacked once) and model points, read once for
    all its frames."""

    def __init__(self, reader: GraspSource, store: LabelStore, scene: int):
        self.reader, self.store, self.scene = reader, store, scene
        self.object_ids = store.scenes[scene].object_ids
        collision = np.load(store.collision_file(scene), mmap_mode='r')
        self.labels, self.models = [], {}
        for instance, obj in enumerate(self.object_ids):
            n = store.objects[obj].num_points
            start = store.collision_row_offset(scene, instance)
            self.labels.append(dict(
                points=store.points(obj),
                scores=np.load(store.object_file(obj, 'scores'), mmap_mode='r'),
                widths=np.load(store.object_file(obj, 'widths'), mmap_mode='r'),
                collision=unpack_rows(np.asarray(collision[start:start + n]), store.grid)))
            if obj not in self.models:
                self.models[obj] = reader.load_model_points(obj)

    def convert(self, frame: int, draws: hggd.FrameDraws, apply_visibility: bool = False
                ) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        """One frame's arrays (:func:`.hggd.frame_grasps`) and the intrinsics they used."""
        reader, scene = self.reader, self.scene
        posed = reader.load_object_poses(scene, frame)
        if tuple(int(o) for o in posed.object_ids) != self.object_ids:
            raise LabelStoreError(f'scene {scene} frame {frame}: {_pose_file(reader, scene, frame)}'
                                  f' lists objects {posed.object_ids.tolist()} but the label '
                                  f'store {self.store.path} holds {list(self.object_ids)}; '
                                  f'rebuild the label store')
        instances = [hggd.InstanceLabels(obj, pose, model_points=self.models[obj], **grids)
                     for obj, pose, grids in zip(self.object_ids, posed.poses, self.labels)]
        matrix, size, depth = _projection(reader, scene, frame)
        cloud = _depth_cloud(reader, scene, frame, depth) if apply_visibility else None
        arrays = hggd.frame_grasps(instances, matrix, size, draws, camera_pose=posed.camera_pose,
                                   cloud=cloud, apply_visibility=apply_visibility)
        return arrays, matrix


def scene_grasps(reader: GraspSource, store: LabelStore, scene: int, seed: int,
                 apply_visibility: bool) -> Dict[str, np.ndarray]:
    """Every frame of ``scene``, drawn from (seed, scene, camera, frame): the concatenated
    fields, ``counts`` (rows per frame), ``intrinsics`` (F, 3, 3), ``fingerprints`` (F, 2, 2)."""
    labels = SceneLabels(reader, store, scene)
    parts: Dict[str, list] = {name: [] for name in hggd.FIELDS}
    counts, intrinsics, fingerprints = [], [], []
    for frame in range(reader.num_frames(scene)):
        fingerprints.append([_fingerprint(p) for p in _frame_sources(reader, scene, frame)])
        draws = hggd.FrameDraws(frame_rng(seed, scene, reader.camera, frame))
        arrays, matrix = labels.convert(frame, draws, apply_visibility)
        for name, array in arrays.items():
            parts[name].append(array)
        counts.append(len(arrays['object_ids']))
        intrinsics.append(matrix)
    out = {name: np.concatenate(arrays) if arrays else hggd.empty_arrays()[name]
           for name, arrays in parts.items()}
    out.update(counts=np.asarray(counts, np.int64),
               intrinsics=np.asarray(intrinsics, np.float64).reshape(-1, 3, 3),
               fingerprints=np.asarray(fingerprints, np.int64).reshape(-1, 2, 2))
    return out


def _save_scene(job: tuple) -> Tuple[int, int, int, float, float]:
    """Convert one scene into its partial file (a worker's task): scene, frames, grasps,
    seconds and the process's peak resident MiB."""
    reader, store, scene, seed, apply_visibility, path = job
    t0 = time.perf_counter()
    arrays = scene_grasps(reader, store, scene, seed, apply_visibility)
    tmp = f'{path}.tmp-{os.getpid()}.npz'
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return (scene, len(arrays['counts']), int(arrays['counts'].sum()),
            time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# ---------------------------------------------------------------------------------- build
def _partial_folder(folder: str, store: LabelStore, options: dict) -> str:
    key = hashlib.sha1(json.dumps([FORMAT_VERSION, os.path.basename(store.path), options],
                                  sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(folder, PARTIAL_PREFIX + key)


def _convert_scenes(reader: GraspSource, store: LabelStore, scenes: List[int], options: dict,
                    partial: str, nproc: int) -> None:
    """Write the partial file of every scene that has none (or a stale one)."""
    folder = os.path.dirname(partial)
    os.makedirs(partial, exist_ok=True)
    for entry in os.listdir(folder):  # partial work of other options or store versions
        if entry.startswith(PARTIAL_PREFIX) and os.path.join(folder, entry) != partial:
            shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
    todo = []
    for scene in scenes:
        path = os.path.join(partial, f'scene_{scene:04d}.npz')
        if os.path.exists(path) and _partial_current(reader, store, scene, path):
            continue
        todo.append((reader, store, scene, options['seed'], options['apply_visibility'], path))
    done = len(scenes) - len(todo)
    if done:
        print_log(f'HGGD grasps ({reader.camera}): resuming, {done} of {len(scenes)} scenes were '
                  f'converted by an earlier build', logger='current')
    t0, frames = time.perf_counter(), 0

    def report(result) -> None:
        nonlocal done, frames
        scene, count, grasps, seconds, peak = result
        done, frames = done + 1, frames + count
        elapsed = time.perf_counter() - t0
        print_log(f'HGGD grasps ({reader.camera}): scene {scene:04d} ({done}/{len(scenes)}, '
                  f'{count} frames, {grasps} grasps, {seconds:.1f}s, peak {peak:.0f} MiB; '
                  f'{elapsed / max(frames, 1):.2f}s a frame)', logger='current')

    if nproc <= 1 or len(todo) <= 1:
        for job in todo:
            report(_save_scene(job))
        return
    ctx = mp.get_context('fork' if 'fork' in mp.get_all_start_methods() else 'spawn')
    with ctx.Pool(min(nproc, len(todo))) as pool:
        for result in pool.imap_unordered(_save_scene, todo):
            report(result)


def _partial_current(reader: GraspSource, store: LabelStore, scene: int, path: str) -> bool:
    """Whether a scene's partial file was made from the files as they are now."""
    try:
        with np.load(path) as npz:
            fingerprints = npz['fingerprints']
    except (OSError, ValueError, KeyError):
        return False
    if len(fingerprints) != reader.num_frames(scene):
        return False
    current = [[_fingerprint(p) for p in _frame_sources(reader, scene, f)]
               for f in range(len(fingerprints))]
    return np.array_equal(np.asarray(current, np.int64).reshape(fingerprints.shape), fingerprints)


def _build_into(tmp: str, reader: GraspSource, store: LabelStore, options: dict,
                partial: str, nproc: int) -> dict:
    scenes = asset_scenes(reader, store)
    if not scenes:
        raise DatasetFileError(os.path.join(reader.root, 'scenes'),
                               f'no scene of camera {reader.camera} has labels in {store.path}')
    scene_sources = {f'{s:04d}': _scene_sources(reader, store, s) for s in scenes}
    _convert_scenes(reader, store, scenes, options, partial, nproc)
    files = [os.path.join(partial, f'scene_{s:04d}.npz') for s in scenes]
    counts, frames = [], []
    for scene, path in zip(scenes, files):
        with np.load(path) as npz:
            counts.append(npz['counts'])
    total = int(sum(c.sum() for c in counts))
    outputs = {name: np.lib.format.open_memmap(os.path.join(tmp, f'{name}.npy'), mode='w+',
                                               dtype=dtype, shape=(total, *shape))
               for name, (shape, dtype) in hggd.FIELDS.items()}
    intrinsics, fingerprints, row, manifest_scenes = [], [], 0, {}
    for scene, path, count in zip(scenes, files, counts):
        manifest_scenes[f'{scene:04d}'] = [len(frames), len(count)]
        with np.load(path) as npz:
            n = int(count.sum())
            for name, output in outputs.items():
                output[row:row + n] = npz[name]
            intrinsics.append(npz['intrinsics'])
            fingerprints.append(npz['fingerprints'])
        ends = row + np.cumsum(count)
        frames.extend([scene, f, int(e - c), int(e)] for f, (c, e) in enumerate(zip(count, ends)))
        row += n
    for output in outputs.values():
        output.flush()
    del outputs
    save_array(os.path.join(tmp, 'frames.npy'), np.asarray(frames, np.int64).reshape(-1, 4))
    save_array(os.path.join(tmp, 'intrinsics.npy'), np.concatenate(intrinsics))
    save_array(os.path.join(tmp, 'fingerprints.npy'), np.concatenate(fingerprints))
    shutil.rmtree(partial, ignore_errors=True)
    return dict(format_version=FORMAT_VERSION, label_store=os.path.basename(store.path),
                root=reader.root, camera=reader.camera, layout=reader.layout, **options,
                num_frames=len(frames), num_grasps=total,
                rules=dict(reference=hggd.REFERENCE, max_mu=float(hggd.MAX_MU),
                           width_range=list(hggd.WIDTH_RANGE),
                           depth_range=list(hggd.DEPTH_RANGE), max_grasps=hggd.MAX_GRASPS,
                           model_points=hggd.MODEL_POINTS, nms=[hggd.NMS_TRANSLATION,
                                                               hggd.NMS_ROTATION]),
                scenes=manifest_scenes, scene_sources=scene_sources)


def _read_version(version: str) -> Optional[Tuple[dict, np.ndarray, np.ndarray]]:
    """A version's manifest, frame index and source fingerprints (None when it has none)."""
    manifest = read_manifest(version, LabelStoreError)
    if manifest is None:
        return None
    try:
        return (manifest, np.load(os.path.join(version, 'frames.npy')),
                np.load(os.path.join(version, 'fingerprints.npy')))
    except (OSError, ValueError) as exc:
        raise LabelStoreError(f'{version}: unreadable frame index ({exc}); delete {version} '
                              f'and rebuild') from exc


def stale_reason(found: Tuple[dict, np.ndarray, np.ndarray], reader: GraspSource,
                 store: LabelStore, options: dict) -> Optional[str]:
    """Why a version may not be used (None when it may)."""
    manifest, index, recorded = found
    if manifest.get('format_version') != FORMAT_VERSION:
        return f'format version {manifest.get("format_version")}, expected {FORMAT_VERSION}'
    if manifest.get('label_store') != os.path.basename(store.path):
        return (f'it was derived from label store version {manifest.get("label_store")}, '
                f'the current one is {os.path.basename(store.path)}')
    if {k: manifest.get(k) for k in options} != options or manifest.get('root') != reader.root \
            or manifest.get('camera') != reader.camera:
        return 'it was built from another root or camera, or with other options'
    scenes = asset_scenes(reader, store)
    if [int(s) for s in manifest['scenes']] != scenes:
        return f'the set of scenes of camera {reader.camera} with labels changed'
    for scene in scenes:
        if manifest['scene_sources'][f'{scene:04d}'] != _scene_sources(reader, store, scene):
            return f'the camera or model files of scene {scene} changed since it was built'
    current = np.asarray([[_fingerprint(p) for p in _frame_sources(reader, int(s), int(f))]
                          for s, f, _, _ in index], np.int64).reshape(recorded.shape)
    changed = np.argwhere((current != recorded).any(axis=(1, 2)))
    if len(changed):
        scene, frame = index[changed[0, 0], :2]
        return (f'{len(changed)} frames\' pose or depth files changed since it was built, e.g. '
                f'scene {scene} frame {frame}')
    return None


def open_hggd_grasps(reader: GraspSource, cache_dir: Optional[str] = None, seed: int = 0,
                     apply_visibility: bool = False, nproc: int = 1, build: bool = True,
                     force: bool = False) -> HGGDGraspStore:
    """Open the HGGD grasps of ``reader``'s root and camera, building them (as a new version,
    atomically, resuming a killed build) when missing, stale or ``force``. The label store is
    opened (built when missing) first.

    Args:
        reader: the dataset reader (``mmgrasp.datasets.layouts.open_reader(root, camera)``).
        cache_dir: the cache folder of the label store (default ``$MMGRASP_CACHE``).
        seed: the seed of the frames' draws (model points, the 5 000-grasp subsample, the
            visibility cloud), each from (seed, scene, camera, frame).
        apply_visibility: drop the grasps whose reconstructed centre has no depth point within
            1 cm (the reference computes this mask and saves its arrays without it).
        nproc: processes that convert scenes in parallel during a build.
        build: build when missing or stale (else raise, saying how to build).
        force: build a new version even when the current one is up to date.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f'seed={seed!r}: expected a non-negative int')
    if not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f'nproc={nproc!r}: expected a positive int')
    store = open_label_store(reader, cache_dir, build=build)
    if not os.path.isdir(store.path):
        raise LabelStoreError(f'HGGD grasps are derived from a local label store; {store.path} '
                              f'is not a folder')
    options = dict(seed=seed, apply_visibility=bool(apply_visibility))
    folder = hggd_folder(store, reader.camera, seed, options['apply_visibility'])
    partial = _partial_folder(folder, store, options)
    hint = (f'Build it with `python tools/data/build_hggd_labels.py {reader.root} --camera '
            f'{reader.camera}{" --cache " + cache_dir if cache_dir else ""}'
            f'{" --seed " + str(seed) if seed else ""}'
            f'{" --apply-visibility" if apply_visibility else ""}`')
    return open_or_build(
        folder, 'HGGD grasps', LabelStoreError, _read_version,
        lambda found: stale_reason(found, reader, store, options),
        lambda tmp: _build_into(tmp, reader, store, options, partial, nproc),
        lambda version, found, hold: HGGDGraspStore(version, found[0], found[1], hold),
        build=build, force=force, rebuild_hint=hint)
