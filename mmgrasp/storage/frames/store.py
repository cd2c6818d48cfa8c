"""A frame's masked cloud, read from the dataset files or from the frame store built from them.

Every sample of a frame repeats the same work: decode the depth and label PNGs and the meta
file, rebuild the workspace mask, read the graspness file and check that it labels exactly the
masked pixels. The frame store does it once per frame and keeps the result in a few large
memory-mapped arrays; :func:`read_frame` (the reference path) and :meth:`FrameStore.frame` return
the same :class:`FrameArrays`, value for value.

Store layout (one folder per root, camera and mask settings, next to the label store)::

    manifest.json          format version, root, camera, mask settings, graspness folder,
                           scene -> [first row, frames], per-scene source fingerprints
    fingerprints.npy       (F, 4, 2) int64 (size, mtime_ns) of each frame's depth, label, meta
                           and graspness file; (-1, -1) for a graspness file that did not exist
    point_offsets.npy      (F + 1,) int64: the masked points of frame row f are [o[f], o[f + 1])
    depth.npy              (P,) uint16 raw depth of each masked point
    pixels.npy             (P,) int32 row-major pixel index of each masked point
    seg.npy                (P,) uint8 segmentation (0 background, k = object id + 1)
    graspness.npy          (G,) float32, frames whose graspness file has one row per masked point
    graspness_offsets.npy  (F + 1,) int64; graspness_rows.npy (F,) int64 rows of each file (-1:
                           none): a missing or misaligned file fails as on the files path
    object_offsets.npy     (F + 1,) int64; object_ids.npy (Q,) int64; poses.npy (Q, 3, 4) float32
    intrinsics.npy (F, 3, 3), camera_to_table.npy (F, 4, 4), factor_depth.npy (F,) float64,
    width.npy (F,) int64 image width

Points are kept as raw depth and pixel index (6 bytes a point; a float32 cloud would take 12, for
0.1 ms less a sample) and back-projected for the sampled points only, with the reference's
float64 arithmetic (:func:`pixel_points`): the same values bit for bit. The store is built
atomically as a version beside the ones in use (see :mod:`.derived_assets`) and checked against
its sources' (size, mtime) on every open; a stale store is rebuilt as a new version.
"""
import contextlib
import functools
import hashlib
import io
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

import numpy as np
from mmengine.logging import print_log

from ..derived_assets import MANIFEST, VersionHold, open_or_build
from ..source import DatasetFileError, GraspSource
from ..labels.store import default_cache_dir

FORMAT_VERSION = 1
_IMAGE_FILES = ('depth', 'label', 'meta')
_NPY_HEADER = 128  # bytes: numpy's v1.0 header of a shape of up to four dimensions
#: Frames from which a build decodes in several processes (unless told how many).
PARALLEL_FRAMES = 64
T = TypeVar('T')


class FrameStoreError(RuntimeError):
    """A frame store that cannot be used as it is (stale, foreign or not writable)."""


# ---------------------------------------------------------------------------------- geometry
def pixel_points(depth: np.ndarray, pixels: np.ndarray, width: int, intrinsics: np.ndarray,
                 factor_depth: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Camera-frame x, y, z (float64, each (n,) and contiguous) of row-major ``pixels`` of an
    image ``width`` wide with raw depths ``depth``: z = d / factor_depth, x = (u - cx) z / fx,
    y = (v - cy) z / fy, the reference's operations in the reference's order."""
    z = depth / factor_depth
    u, v = pixels % width, pixels // width
    return ((u - intrinsics[0, 2]) * z / intrinsics[0, 0],
            (v - intrinsics[1, 2]) * z / intrinsics[1, 1], z)


def box_mask(xyz: Tuple[np.ndarray, np.ndarray, np.ndarray], foreground: np.ndarray,
             camera_to_table: np.ndarray, outlier: float,
             origin_is_foreground: bool = False) -> np.ndarray:
    """Points strictly inside the table-frame box of the ``foreground`` points grown by
    ``outlier`` per side, one table coordinate at a time over contiguous arrays.

    ``origin_is_foreground``: foreground pixels without a depth reading were left out of ``xyz``;
    they sit on the camera origin, whose table coordinates are the translation, exactly.
    """
    rotation, translation = camera_to_table[:3, :3], camera_to_table[:3, 3]
    if not (origin_is_foreground or foreground.any()):
        raise ValueError('the segmentation has no foreground pixel: the workspace box is undefined')
    x, y, z = xyz
    mask, term = np.ones(len(x), dtype=bool), np.empty_like(x)
    for axis in range(3):
        # r0 x + r1 y + r2 z + t, summed left to right as the reference does, in place
        coord = rotation[axis, 0] * x
        coord += np.multiply(rotation[axis, 1], y, out=term)
        coord += np.multiply(rotation[axis, 2], z, out=term)
        coord += translation[axis]
        inside = coord[foreground]
        if origin_is_foreground:
            inside = np.append(inside, translation[axis])
        mask &= coord > inside.min() - outlier
        mask &= coord < inside.max() + outlier
    return mask


def masked_pixels(depth: np.ndarray, seg: np.ndarray, intrinsics: np.ndarray,
                  factor_depth: float, camera_to_table: Optional[np.ndarray],
                  outlier: float = 0.02) -> np.ndarray:
    """Row-major pixel indices (int64) of the masked cloud: depth > 0 and, unless
    ``camera_to_table`` is None, inside the workspace box (graspnet-baseline's mask; GSNet's
    graspness rows follow this order). Only pixels with a reading are back-projected."""
    flat_depth, flat_seg = depth.reshape(-1), seg.reshape(-1)
    valid = np.flatnonzero(flat_depth)
    if camera_to_table is None:
        return valid
    xyz = pixel_points(np.take(flat_depth, valid), valid, depth.shape[1], intrinsics, factor_depth)
    foreground = np.take(flat_seg, valid) > 0
    origin = np.count_nonzero(flat_seg) > np.count_nonzero(foreground)
    return valid[box_mask(xyz, foreground, camera_to_table, outlier, origin)]


def workspace_image(depth: np.ndarray, seg: np.ndarray, intrinsics: np.ndarray,
                    factor_depth: float, camera_to_table: Optional[np.ndarray],
                    outlier: float = 0.02) -> np.ndarray:
    """(H, W) bool image of :func:`masked_pixels`: the pixels the dataset's masked cloud keeps
    (what ``GraspInferencer(segmentation=, camera_to_table=)``, the demo's ``--scene/--frame``
    and tools/data/write_workspace_mask.py apply)."""
    mask = np.zeros(depth.size, dtype=bool)
    mask[masked_pixels(depth, seg, intrinsics, factor_depth, camera_to_table, outlier)] = True
    return mask.reshape(depth.shape)


def frame_workspace(reader: GraspSource, scene: int, frame: int,
                    outlier: float = 0.02) -> np.ndarray:
    """(H, W) bool workspace of a dataset frame, from its depth, segmentation, meta and camera
    pose, by the rule :func:`read_frame` loads it with."""
    depth = reader.load_depth(scene, frame)
    seg = reader.load_segmentation(scene, frame)
    meta = reader.load_meta(scene, frame)
    if seg.shape != depth.shape:
        raise ValueError(f'scene {scene} frame {frame} ({reader.camera}): segmentation '
                         f'{seg.shape} and depth {depth.shape} differ in size')
    return workspace_image(depth, seg, meta.intrinsics, meta.factor_depth,
                           reader.trajectory(scene).camera_to_table(frame).astype(np.float64),
                           outlier)


# ---------------------------------------------------------------------------------- frames
@dataclass(frozen=True)
class FrameArrays:
    """The masked cloud of one frame (per masked point, in masked-cloud order) and its meta."""
    depth: np.ndarray  # (n,) uint16 raw depth
    pixels: np.ndarray  # (n,) row-major pixel index
    seg: np.ndarray  # (n,) 0 background, k = object id + 1
    graspness: Optional[np.ndarray]  # (graspness_rows,) float32; None: not read or misaligned
    graspness_rows: int  # rows of the graspness file; -1: not read or no file
    width: int
    object_ids: np.ndarray  # (M,) int64, 0-based, meta order
    poses: np.ndarray  # (M, 3, 4) float32
    intrinsics: np.ndarray  # (3, 3) float64
    factor_depth: float
    camera_to_table: np.ndarray  # (4, 4) float64


def read_frame(reader: GraspSource, scene: int, frame: int, outlier: Optional[float],
               with_graspness: bool) -> FrameArrays:
    """Decode a frame from the dataset files (the reference path); ``outlier=None`` skips the
    workspace mask. With ``with_graspness`` the graspness file must exist (its rows are checked
    by :func:`aligned_graspness`)."""
    where = f'scene {scene} frame {frame} ({reader.camera})'
    depth = reader.load_depth(scene, frame)
    seg = reader.load_segmentation(scene, frame)
    meta = reader.load_meta(scene, frame)
    camera_to_table = reader.trajectory(scene).camera_to_table(frame).astype(np.float64)
    if seg.shape != depth.shape:
        raise ValueError(f'{where}: segmentation {seg.shape} and depth {depth.shape} differ in '
                         f'size')
    try:
        pixels = masked_pixels(depth, seg, meta.intrinsics, meta.factor_depth,
                               None if outlier is None else camera_to_table, outlier or 0.0)
    except ValueError as exc:
        raise ValueError(f'{where}: {exc}') from exc
    graspness = reader.load_graspness(scene, frame) if with_graspness else None
    return FrameArrays(depth=np.take(depth.reshape(-1), pixels), pixels=pixels,
                       seg=np.take(seg.reshape(-1), pixels), graspness=graspness,
                       graspness_rows=-1 if graspness is None else len(graspness),
                       width=depth.shape[1], object_ids=meta.object_ids.astype(np.int64),
                       poses=meta.poses.astype(np.float32), intrinsics=meta.intrinsics,
                       factor_depth=meta.factor_depth, camera_to_table=camera_to_table)


def aligned_graspness(arrays: FrameArrays, reader: GraspSource, scene: int, frame: int,
                      outlier: Optional[float]) -> np.ndarray:
    """The frame's graspness, one row per masked point, or an error naming the file."""
    path = reader.graspness_path(scene, frame)
    if arrays.graspness_rows < 0:
        raise DatasetFileError(path, f'file not found when the frame store was built; generate '
                                     f'it with `python tools/data/generate_graspness.py '
                                     f'{reader.root} --camera {reader.camera}` (the store is '
                                     f'rebuilt on its next open)')
    if arrays.graspness_rows != len(arrays.pixels):
        mask = 'depth > 0' if outlier is None else f'depth > 0 & workspace, outlier {outlier}'
        raise DatasetFileError(path, f'has {arrays.graspness_rows} rows but the masked cloud of '
                                     f'scene {scene} frame {frame} ({reader.camera}) has '
                                     f'{len(arrays.pixels)} points ({mask})')
    return arrays.graspness


# ---------------------------------------------------------------------------------- store
def frame_store_path(root: str, camera: str, outlier: Optional[float],
                     graspness_dir: Optional[str] = None, cache_dir: Optional[str] = None) -> str:
    """``<cache>/frames-<root name>-<hash of root, mask, graspness folder>-<camera>``."""
    root = os.path.abspath(root)
    graspness_dir = os.path.abspath(graspness_dir or os.path.join(root, 'graspness'))
    key = hashlib.sha1(f'{root}|{outlier!r}|{graspness_dir}'.encode()).hexdigest()[:10]
    name = f'frames-{os.path.basename(root.rstrip(os.sep)) or "root"}-{key}-{camera}'
    return os.path.join(cache_dir or default_cache_dir(), name)


def fingerprint(path: str) -> Tuple[int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def frame_sources(reader: GraspSource, scene: int, frame: int) -> List[str]:
    """The files a frame store row is decoded from: depth, label, meta, graspness."""
    return [reader.frame_path(scene, kind, frame) for kind in _IMAGE_FILES] + \
        [reader.graspness_path(scene, frame)]


def camera_scenes(reader: GraspSource) -> List[int]:
    """Scenes (any split) with a folder of the reader's camera."""
    return reader.present_scenes()


def scene_fingerprints(reader: GraspSource, scene: int) -> Dict[str, List[int]]:
    """(size, mtime) of the per-scene files (camera intrinsics and poses), by file name."""
    return {os.path.basename(path): list(fingerprint(path))
            for path in reader.trajectory_files(scene)}


def manifest_rows(manifest: dict) -> List[Tuple[int, int]]:
    """The (scene, frame) of each row of a store, from its manifest."""
    return [(int(scene), frame) for scene, (_, count) in manifest['scenes'].items()
            for frame in range(count)]


class FrameStore:
    """An opened store: offsets and per-frame meta in memory, per-point arrays memory-mapped
    (forked workers share the maps)."""

    def __init__(self, path: str, manifest: dict, hold: Optional[VersionHold] = None):
        self.path, self.manifest = path, manifest
        self.hold = hold  # keeps this version on disk while the store is in use
        self.rows: Dict[Tuple[int, int], int] = {
            (scene, frame): row for row, (scene, frame) in enumerate(manifest_rows(manifest))}
        for name in ('point_offsets', 'graspness_offsets', 'graspness_rows', 'object_offsets',
                     'object_ids', 'poses', 'intrinsics', 'camera_to_table', 'factor_depth',
                     'width'):
            setattr(self, name, np.load(f'{path}/{name}.npy'))
        # plain ndarray views of the maps: their slices and gathers pickle as arrays
        self.depth, self.pixels, self.seg, self.graspness = (
            np.asarray(np.load(f'{path}/{name}.npy', mmap_mode='r'))
            for name in ('depth', 'pixels', 'seg', 'graspness'))

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self, scene: int, frame: int) -> FrameArrays:
        row = self.rows.get((scene, frame))
        if row is None:
            raise KeyError(f'scene {scene} frame {frame} is not in frame store {self.path}')
        p0, p1 = self.point_offsets[row:row + 2]
        g0, g1 = self.graspness_offsets[row:row + 2]
        o0, o1 = self.object_offsets[row:row + 2]
        return FrameArrays(
            depth=self.depth[p0:p1], pixels=self.pixels[p0:p1], seg=self.seg[p0:p1],
            graspness=self.graspness[g0:g1] if g1 > g0 else None,
            graspness_rows=int(self.graspness_rows[row]),
            width=int(self.width[row]), object_ids=self.object_ids[o0:o1].copy(),
            poses=self.poses[o0:o1].copy(), intrinsics=self.intrinsics[row].copy(),
            factor_depth=float(self.factor_depth[row]),
            camera_to_table=self.camera_to_table[row].copy())


def stale_reason(manifest: dict, fingerprints: np.ndarray, reader: GraspSource,
                 outlier: Optional[float]) -> Optional[str]:
    """Why a store may not be used for this reader and mask (None when it may)."""
    return (built_for(manifest, FORMAT_VERSION, root=reader.root, camera=reader.camera,
                      outlier=outlier, graspness_dir=os.path.abspath(reader.graspness_dir))
            or sources_changed(manifest, fingerprints, reader, frame_sources))


def built_for(manifest: dict, version: int, **expected) -> Optional[str]:
    """Why a store's manifest is not of format ``version`` and of the ``expected`` settings
    (None when it is)."""
    if manifest.get('format_version') != version:
        return f'format version {manifest.get("format_version")}, this mmgrasp reads {version}'
    for key, value in expected.items():
        if manifest.get(key) != value:
            return f'it was built with {key}={manifest.get(key)!r}, not {value!r}'
    return None


def sources_changed(manifest: dict, fingerprints: np.ndarray, reader: GraspSource,
                    sources: Callable[[GraspSource, int, int], List[str]]) -> Optional[str]:
    """Which scene or source file changed since a store was built (None when none did):
    the scenes of the camera, their per-scene files, and each frame's ``sources``, whose
    (size, mtime) were recorded in ``fingerprints``."""
    if [int(s) for s in manifest['scenes']] != camera_scenes(reader):
        return f'the set of scenes with a {reader.camera}/ folder changed'
    for scene, recorded in manifest['scene_sources'].items():
        current = scene_fingerprints(reader, int(scene))
        for name in sorted(set(current) | set(recorded)):
            if current.get(name) != recorded.get(name):
                return f'source {name} of scene {scene} changed since the store was built'
    rows = manifest_rows(manifest)
    current = np.array([[fingerprint(p) for p in sources(reader, *r)] for r in rows],
                       np.int64).reshape(fingerprints.shape)
    changed = np.argwhere((current != fingerprints).any(axis=2))
    if len(changed):
        row, kind = changed[0]
        path = sources(reader, *rows[row])[kind]
        return (f'{len(changed)} source files changed, appeared or disappeared since the store '
                f'was built, e.g. {path}')
    return None


class NpyAppender:
    """A .npy file of ``(rows, *item_shape)`` written in chunks of rows; its header (the final
    shape) is written last."""

    def __init__(self, path: str, dtype: type, item_shape: Tuple[int, ...] = ()):
        self.file = open(path, 'wb')
        self.file.seek(_NPY_HEADER)
        self.dtype, self.rows, self.item_shape = np.dtype(dtype), 0, tuple(item_shape)

    def append(self, array: np.ndarray) -> None:
        if array.shape[1:] != self.item_shape:
            raise ValueError(f'{self.file.name}: rows of shape {self.item_shape} expected, got '
                             f'{array.shape[1:]}')
        self.file.write(np.ascontiguousarray(array, dtype=self.dtype).data)
        self.rows += len(array)

    def finish(self) -> None:
        """Write the header (the file is closed when the ``with`` block ends)."""
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, dict(
            descr=np.lib.format.dtype_to_descr(self.dtype), fortran_order=False,
            shape=(self.rows, *self.item_shape)))
        assert header.tell() == _NPY_HEADER, header.getvalue()
        self.file.seek(0)
        self.file.write(header.getvalue())

    def __enter__(self) -> 'NpyAppender':
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


def build_workers(num_frames: int, workers: Optional[int] = None) -> int:
    """Processes that decode a store's frames: ``workers`` when given, else 1 for fewer than
    :data:`PARALLEL_FRAMES` frames (a demo) and up to 8 of this process's CPUs beyond."""
    if workers is not None:
        if workers < 1:
            raise ValueError(f'workers must be >= 1, got {workers}')
        return int(workers)
    return 1 if num_frames < PARALLEL_FRAMES else max(1, min(8, len(os.sched_getaffinity(0))))


_task: Optional[Callable] = None  # the decode function of the build in progress (forked)


def _run_task(row: Tuple[int, int]):
    return _task(row)


def decode_frames(decode: Callable[[Tuple[int, int]], T], rows: Sequence[Tuple[int, int]],
                  workers: int) -> Iterator[T]:
    """``decode(row)`` for every (scene, frame) row, in order: here, or in ``workers`` forked
    processes (a frame's PNG/MAT decoding is independent of the others). An error raised while
    decoding is raised here, naming its file."""
    global _task
    if workers <= 1 or len(rows) <= 1:
        yield from map(decode, rows)
        return
    _task = decode
    try:
        with multiprocessing.get_context('fork').Pool(min(workers, len(rows))) as pool:
            yield from pool.imap(_run_task, rows, chunksize=2)
    finally:
        _task = None


def frame_rows(reader: GraspSource) -> Tuple[List[int], List[Tuple[int, int]]]:
    """The scenes with a folder of the reader's camera and their (scene, frame) rows, in store
    order; an error naming the scenes folder when there is none."""
    scenes = camera_scenes(reader)
    rows = [(scene, frame) for scene in scenes for frame in range(reader.num_frames(scene))]
    if not rows:
        raise DatasetFileError(os.path.join(reader.root, 'scenes'),
                               f'no frame of a {reader.camera} camera')
    return scenes, rows


def build_note(what: str, reader: GraspSource, option: str) -> str:
    """What a frame that cannot be decoded means for a store's build, and the ways out."""
    return (f'while building the {what} of {reader.root} ({reader.camera}), which decodes every '
            f'frame of every scene with a {reader.camera} folder: repair or remove the file, or '
            f'read the dataset files per sample with {option}')


def _decode_points(reader: GraspSource, outlier: Optional[float],
                   row: Tuple[int, int]) -> Tuple[List[Tuple[int, int]], FrameArrays]:
    scene, frame = row
    sources = frame_sources(reader, scene, frame)
    fingerprints = [fingerprint(path) for path in sources]
    try:
        arrays = read_frame(reader, scene, frame, outlier, with_graspness=fingerprints[3][0] >= 0)
        if len(arrays.seg) and arrays.seg.max() > 255:
            raise DatasetFileError(sources[1], f'segmentation value {arrays.seg.max()} does not '
                                               f"fit the frame store's uint8")
    except ValueError as exc:
        exc.add_note(build_note('frame store', reader, "LoadGraspScene(source='files')"))
        raise
    return fingerprints, arrays


def _build_into(tmp: str, reader: GraspSource, outlier: Optional[float],
                workers: Optional[int] = None) -> dict:
    scenes, rows = frame_rows(reader)
    per_frame: Dict[str, list] = {name: [] for name in (
        'num_points', 'num_graspness', 'graspness_rows', 'object_ids', 'poses', 'intrinsics',
        'camera_to_table', 'factor_depth', 'width', 'fingerprints')}
    manifest_scenes, t0 = {}, time.time()
    scene_sources = {f'{scene:04d}': scene_fingerprints(reader, scene) for scene in scenes}
    processes = build_workers(len(rows), workers)
    with contextlib.ExitStack() as files:
        points = {name: files.enter_context(NpyAppender(f'{tmp}/{name}.npy', dtype))
                  for name, dtype in (('depth', np.uint16), ('pixels', np.int32),
                                      ('seg', np.uint8), ('graspness', np.float32))}
        decoded = decode_frames(functools.partial(_decode_points, reader, outlier), rows,
                                processes)
        for row, ((scene, frame), (fingerprints, arrays)) in enumerate(zip(rows, decoded)):
            if frame == 0:
                manifest_scenes[f'{scene:04d}'] = [row, reader.num_frames(scene)]
            aligned = arrays.graspness_rows == len(arrays.pixels)
            for name, appender in points.items():
                if name != 'graspness' or aligned:
                    appender.append(getattr(arrays, name))
            per_frame['num_points'].append(len(arrays.pixels))
            per_frame['num_graspness'].append(len(arrays.pixels) if aligned else 0)
            for name in ('graspness_rows', 'object_ids', 'poses', 'intrinsics',
                         'camera_to_table', 'factor_depth', 'width'):
                per_frame[name].append(getattr(arrays, name))
            per_frame['fingerprints'].append(fingerprints)
            if frame == manifest_scenes[f'{scene:04d}'][1] - 1:
                print_log(f'frame store ({reader.camera}): scene {scene:04d} '
                          f'({scenes.index(scene) + 1}/{len(scenes)}, {frame + 1} frames, '
                          f'{time.time() - t0:.1f}s, {processes} process'
                          f'{"es" if processes > 1 else ""})', logger='current')
        for appender in points.values():
            appender.finish()
    counts = dict(point=per_frame['num_points'], graspness=per_frame['num_graspness'],
                  object=[len(ids) for ids in per_frame['object_ids']])
    for name, count in counts.items():
        np.save(f'{tmp}/{name}_offsets.npy', np.cumsum([0] + count, dtype=np.int64))
    np.save(f'{tmp}/object_ids.npy', np.concatenate(per_frame['object_ids']).astype(np.int64))
    np.save(f'{tmp}/poses.npy', np.concatenate(per_frame['poses']).reshape(-1, 3, 4))
    for name, dtype in (('intrinsics', np.float64), ('camera_to_table', np.float64),
                        ('factor_depth', np.float64), ('width', np.int64),
                        ('graspness_rows', np.int64), ('fingerprints', np.int64)):
        np.save(f'{tmp}/{name}.npy', np.asarray(per_frame[name], dtype=dtype))
    return dict(format_version=FORMAT_VERSION, root=reader.root, camera=reader.camera,
                outlier=outlier, graspness_dir=os.path.abspath(reader.graspness_dir),
                num_frames=len(per_frame['width']), num_points=int(sum(per_frame['num_points'])),
                scenes=manifest_scenes, scene_sources=scene_sources)


def read_store_manifest(store: str) -> Optional[Tuple[dict, np.ndarray]]:
    """A version's manifest and recorded source fingerprints (None when it has none)."""
    try:
        with open(os.path.join(store, MANIFEST)) as f:
            manifest = json.load(f)
        return manifest, np.load(os.path.join(store, 'fingerprints.npy'))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FrameStoreError(f'{store}: unreadable manifest ({exc}); delete the folder and '
                              f'rebuild') from exc


def build_frame_store(reader: GraspSource, outlier: Optional[float] = 0.02,
                      cache_dir: Optional[str] = None, force: bool = False,
                      workers: Optional[int] = None) -> FrameStore:
    """Build (or rebuild, with ``force``) the frame store of ``reader``'s root and camera as a new
    version (see :mod:`.derived_assets`) unless an up-to-date one exists, and return it opened;
    ``outlier=None`` stores the cloud without the workspace mask."""
    return open_frame_store(reader, outlier, cache_dir, build=True, force=force, workers=workers)


def open_frame_store(reader: GraspSource, outlier: Optional[float] = 0.02,
                     cache_dir: Optional[str] = None, build: bool = True,
                     force: bool = False, workers: Optional[int] = None) -> FrameStore:
    """Open the frame store of ``reader``'s root and camera; build it first when missing or
    stale and ``build`` is set, decoding in ``workers`` processes (:func:`build_workers`)."""
    store = frame_store_path(reader.root, reader.camera, outlier, reader.graspness_dir,
                             cache_dir)
    hint = (f'Rebuild it with `python tools/data/build_frame_store.py {reader.root} --camera '
            f'{reader.camera}`')
    return open_or_build(store, 'frame store', FrameStoreError, read_store_manifest,
                         lambda found: stale_reason(*found, reader, outlier),
                         lambda tmp: _build_into(tmp, reader, outlier, workers),
                         lambda path, found, hold: FrameStore(path, found[0], hold),
                         build=build, force=force, rebuild_hint=hint)
