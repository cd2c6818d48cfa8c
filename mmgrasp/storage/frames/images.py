"""Whole RGB and raw depth images of every frame, memory-mapped: the input of image methods
(HGGD), read from the dataset files or from the image store built from them.

A store of its own, beside the frame store and never built for the point recipes: a 1280x720
frame takes 4.6 MB here (2.7 MB of uint8 RGB, 1.8 MB of uint16 depth) against ~1.4 MB of masked
points in the frame store. :func:`read_images` (the reference path) and
:meth:`ImageStore.frame` return the same :class:`ImageArrays`, value for value.

Store layout (one folder per root and camera, next to the label and frame stores)::

    manifest.json      format version, root, camera, image height and width,
                       scene -> [first row, frames], per-scene source fingerprints
    fingerprints.npy   (F, 3, 2) int64 (size, mtime_ns) of each frame's rgb, depth and meta file
    rgb.npy            (F, H, W, 3) uint8, RGB order
    depth.npy          (F, H, W) uint16 raw depth, as in the PNG (metres = depth / factor_depth)
    intrinsics.npy     (F, 3, 3) float64; factor_depth.npy (F,) float64

Every frame of a camera has the same size (a frame of another size fails the build, naming its
file). Built, versioned, checked against its sources and rebuilt like the frame store
(:mod:`.store`, :mod:`..derived_assets`).
"""
import contextlib
import functools
import hashlib
import os
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np
from mmengine.logging import print_log

from ..derived_assets import VersionHold, open_or_build
from ..labels.store import default_cache_dir
from ..source import DatasetFileError, GraspSource
from .store import (FrameStoreError, NpyAppender, build_note, build_workers, built_for,
                    decode_frames, fingerprint, frame_rows, manifest_rows, read_store_manifest,
                    scene_fingerprints, sources_changed)

FORMAT_VERSION = 1


class ImageStoreError(FrameStoreError):
    """An image store that cannot be used as it is (stale, foreign or not writable)."""


@dataclass(frozen=True)
class ImageArrays:
    """One frame's whole images and its camera."""
    rgb: np.ndarray  # (H, W, 3) uint8, RGB order
    depth: np.ndarray  # (H, W) uint16 raw depth
    intrinsics: np.ndarray  # (3, 3) float64
    factor_depth: float


def image_sources(reader: GraspSource, scene: int, frame: int) -> List[str]:
    """The files an image store row is decoded from: rgb, depth, meta."""
    return [reader.frame_path(scene, kind, frame) for kind in ('rgb', 'depth', 'meta')]


def read_images(reader: GraspSource, scene: int, frame: int) -> ImageArrays:
    """Decode a frame's images and camera from the dataset files (the reference path)."""
    rgb, depth = reader.load_rgb(scene, frame), reader.load_depth(scene, frame)
    if rgb.shape[:2] != depth.shape:
        raise DatasetFileError(reader.frame_path(scene, 'rgb', frame),
                               f'is {rgb.shape[1]}x{rgb.shape[0]} but the depth image '
                               f'{reader.frame_path(scene, "depth", frame)} is '
                               f'{depth.shape[1]}x{depth.shape[0]}')
    meta = reader.load_meta(scene, frame)
    return ImageArrays(rgb=rgb, depth=depth, intrinsics=np.asarray(meta.intrinsics, np.float64),
                       factor_depth=float(meta.factor_depth))


def image_store_path(root: str, camera: str, cache_dir: Optional[str] = None) -> str:
    """``<cache>/images-<root name>-<hash of root>-<camera>``."""
    root = os.path.abspath(root)
    key = hashlib.sha1(root.encode()).hexdigest()[:10]
    name = f'images-{os.path.basename(root.rstrip(os.sep)) or "root"}-{key}-{camera}'
    return os.path.join(cache_dir or default_cache_dir(), name)


class ImageStore:
    """An opened image store: the images memory-mapped (forked workers share the maps), the
    cameras in memory."""

    def __init__(self, path: str, manifest: dict, hold: Optional[VersionHold] = None):
        self.path, self.manifest, self.hold = path, manifest, hold
        self.rows: Dict[Tuple[int, int], int] = {
            key: row for row, key in enumerate(manifest_rows(manifest))}
        self.intrinsics = np.load(f'{path}/intrinsics.npy')
        self.factor_depth = np.load(f'{path}/factor_depth.npy')
        self.rgb, self.depth = (np.load(f'{path}/{name}.npy', mmap_mode='r')
                                for name in ('rgb', 'depth'))

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self, scene: int, frame: int) -> ImageArrays:
        """The frame's images, copied out of the maps (the sample owns them, writable)."""
        row = self.rows.get((scene, frame))
        if row is None:
            raise KeyError(f'scene {scene} frame {frame} is not in image store {self.path}')
        return ImageArrays(rgb=np.array(self.rgb[row]), depth=np.array(self.depth[row]),
                           intrinsics=self.intrinsics[row].copy(),
                           factor_depth=float(self.factor_depth[row]))


def stale_reason(manifest: dict, fingerprints: np.ndarray,
                 reader: GraspSource) -> Optional[str]:
    """Why an image store may not be used for this reader (None when it may)."""
    return (built_for(manifest, FORMAT_VERSION, root=reader.root, camera=reader.camera)
            or sources_changed(manifest, fingerprints, reader, image_sources))


def _decode(reader: GraspSource, row: Tuple[int, int]) -> Tuple[list, ImageArrays]:
    scene, frame = row
    fingerprints = [fingerprint(path) for path in image_sources(reader, scene, frame)]
    try:
        return fingerprints, read_images(reader, scene, frame)
    except ValueError as exc:
        exc.add_note(build_note('image store', reader, "LoadRGBDImage(source='files')"))
        raise


def _build_into(tmp: str, reader: GraspSource, workers: Optional[int]) -> dict:
    scenes, rows = frame_rows(reader)
    processes = build_workers(len(rows), workers)
    intrinsics, factor_depth, fingerprints, manifest_scenes = [], [], [], {}
    shape, t0 = None, time.time()
    with contextlib.ExitStack() as files:
        decoded = decode_frames(functools.partial(_decode, reader), rows, processes)
        for row, ((scene, frame), (sources, arrays)) in enumerate(zip(rows, decoded)):
            if shape is None:
                shape = arrays.depth.shape
                rgb = files.enter_context(NpyAppender(f'{tmp}/rgb.npy', np.uint8, (*shape, 3)))
                depth = files.enter_context(NpyAppender(f'{tmp}/depth.npy', np.uint16, shape))
            elif arrays.depth.shape != shape:
                raise DatasetFileError(
                    reader.frame_path(scene, 'rgb', frame),
                    f'is {arrays.depth.shape[1]}x{arrays.depth.shape[0]} but the first frame '
                    f'of camera {reader.camera} is {shape[1]}x{shape[0]}: an image store holds '
                    f'one image size per camera')
            if frame == 0:
                manifest_scenes[f'{scene:04d}'] = [row, reader.num_frames(scene)]
            rgb.append(arrays.rgb[None])
            depth.append(arrays.depth[None])
            intrinsics.append(arrays.intrinsics)
            factor_depth.append(arrays.factor_depth)
            fingerprints.append(sources)
            if frame == manifest_scenes[f'{scene:04d}'][1] - 1:
                print_log(f'image store ({reader.camera}): scene {scene:04d} '
                          f'({scenes.index(scene) + 1}/{len(scenes)}, {frame + 1} frames, '
                          f'{time.time() - t0:.1f}s, {processes} process'
                          f'{"es" if processes > 1 else ""})', logger='current')
        rgb.finish()
        depth.finish()
    np.save(f'{tmp}/intrinsics.npy', np.asarray(intrinsics, np.float64))
    np.save(f'{tmp}/factor_depth.npy', np.asarray(factor_depth, np.float64))
    np.save(f'{tmp}/fingerprints.npy', np.asarray(fingerprints, np.int64))
    return dict(format_version=FORMAT_VERSION, root=reader.root, camera=reader.camera,
                height=int(shape[0]), width=int(shape[1]), num_frames=len(rows),
                scenes=manifest_scenes,
                scene_sources={f'{s:04d}': scene_fingerprints(reader, s) for s in scenes})


def open_image_store(reader: GraspSource, cache_dir: Optional[str] = None, build: bool = True,
                     force: bool = False, workers: Optional[int] = None) -> ImageStore:
    """Open the image store of ``reader``'s root and camera; build it first (in ``workers``
    processes, see :func:`.store.build_workers`) when missing or stale and ``build`` is set, or
    anew with ``force``."""
    hint = (f'Rebuild it with `python tools/data/build_frame_store.py {reader.root} --camera '
            f'{reader.camera} --images`')
    return open_or_build(image_store_path(reader.root, reader.camera, cache_dir), 'image store',
                         ImageStoreError, read_store_manifest,
                         lambda found: stale_reason(*found, reader),
                         lambda tmp: _build_into(tmp, reader, workers),
                         lambda path, found, hold: ImageStore(path, found[0], hold),
                         build=build, force=force, rebuild_hint=hint)
