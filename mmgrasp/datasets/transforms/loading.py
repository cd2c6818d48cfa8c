"""Loading one GraspNet-1Billion frame as a sampled point cloud.

The cloud, the workspace mask and the sampling follow graspnet-baseline's ``get_data_label``
(``create_point_cloud_from_depth_image``, ``get_workspace_mask``) exactly, because GSNet's
graspness files hold one row per point of that masked cloud: any other mask misaligns them.
The masked cloud comes from the dataset files or from the frame store built from them
(:mod:`mmgrasp.storage.frames.store`); both give the same sample, bit for bit.
"""
import warnings
from typing import Dict, List, Optional, Tuple

import numpy as np
from mmcv.transforms import BaseTransform

from mmgrasp.storage.frames.store import (FrameStore, aligned_graspness, box_mask, camera_scenes,
                                          open_frame_store, pixel_points, read_frame)
from mmgrasp.storage.labels.store import default_cache_dir
from mmgrasp.storage.source import GraspSource
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.registry import TRANSFORMS
from .depth_image import implausible_depth

SOURCES = ('files', 'frames')
_warned_depth: set = set()  # (root, camera) whose implausible depth was reported (once)
_frame_stores: Dict[Tuple[str, str, str, Optional[float], str], FrameStore] = {}


def depth_to_cloud(depth: np.ndarray, intrinsics: np.ndarray, factor_depth: float) -> np.ndarray:
    """(H, W, 3) float64 camera-frame cloud of a raw depth image, in the image layout.

    z = d / factor_depth, x = (u - cx) z / fx, y = (v - cy) z / fy, with u the column and v the
    row; pixels without a reading (d = 0) land on the camera origin. The reference's full-image
    form (for inspection, and the tests' check of the pixel-wise rule); loading and graspness
    generation back-project only the pixels they keep.
    """
    h, w = depth.shape
    xyz = pixel_points(depth.reshape(-1), np.arange(h * w), w, intrinsics, factor_depth)
    return np.stack(xyz, axis=-1).reshape(h, w, 3)


def workspace_mask(cloud: np.ndarray, seg: np.ndarray, camera_to_table: np.ndarray,
                   outlier: float) -> np.ndarray:
    """(H, W) bool: points strictly inside the table-frame box of the foreground, grown by
    ``outlier`` per side.

    As in the reference, the box is taken over every pixel with seg > 0, including those without a
    depth reading (they sit on the camera origin); callers also require depth > 0.
    """
    xyz = tuple(np.ascontiguousarray(cloud[..., axis]).reshape(-1) for axis in range(3))
    return box_mask(xyz, seg.reshape(-1) > 0, camera_to_table, outlier).reshape(seg.shape)


def prepared_readers(data_root: str, camera: Optional[str] = None,
                     reader: Optional[GraspSource] = None) -> List[GraspSource]:
    """The readers whose stores a loading transform opens before loader workers fork: the
    dataset's own ``reader`` (its graspness folder included) when given, else one of
    ``camera``, else one per camera with scenes under ``data_root``."""
    if reader is not None:
        return [reader]
    cameras = [camera] if camera else open_reader(data_root).cameras
    readers = [open_reader(data_root, c) for c in cameras]
    return [r for r in readers if camera or camera_scenes(r)]


@TRANSFORMS.register_module()
class LoadGraspScene(BaseTransform):
    """Load depth, segmentation and meta of a frame and sample a fixed-size point cloud.

    The masked cloud keeps pixels with depth > 0 (and inside the workspace box when
    ``use_workspace``) in row-major image order. If it has at least ``num_points`` points,
    ``num_points`` are chosen without replacement; otherwise all of them are kept and the rest
    drawn with replacement. All objects of the meta file are kept here; the label transform drops
    those with too few sampled points.

    ``source='frames'`` (the default) reads the frame store: every frame of the root's camera
    decoded once, memory-mapped, built by :meth:`prepare` (the dataset calls it in the main
    process, before loader workers fork) or on first use, checked against its sources once a
    process and rebuilt when one changed. ``source='files'`` decodes the PNG and MAT files of
    the frame for every sample (the reference path). Both give the same keys, values and random
    draws.

    Required Keys:

    - reader (GraspNetReader)
    - scene (int)
    - frame (int)
    - rng (np.random.Generator)

    Added Keys:

    - points (np.float32, (N, 3)): camera frame, metres
    - seg (np.int64, (N,)): 0 background, k = object id + 1
    - objectness (np.int64, (N,)): seg > 0
    - point_index (np.int64, (N,)): row of each point in the masked cloud
    - graspness (np.float32, (N,)): only with ``with_graspness``
    - object_ids (np.int64, (M,)): 0-based, in meta order, which must be the scene's
      ``object_id_list.txt`` order (checked for every frame: collision arrays follow it)
    - poses (np.float32, (M, 3, 4)): model -> camera
    - instance_index (np.int64, (M,)): position in meta ``cls_indexes`` (collision arrays)
    - camera_to_table (np.float64, (4, 4))
    - intrinsics (np.float64, (3, 3))
    - factor_depth (float)
    - num_masked (int): points in the masked cloud
    - voxel_size (float): only when ``voxel_size`` is set
    - masked_cloud (np.float32, (num_masked, 3)): the whole masked cloud, only with
      ``with_masked_cloud`` (the reference test scripts' collision filter reads it)

    Args:
        num_points: points per sample (GSNet 15000, graspnet-baseline 20000).
        outlier: margin of the workspace box per side, metres.
        use_workspace: apply the workspace mask (every reference recipe trains with it).
        voxel_size: recorded for PackGraspInputs, which derives voxel coordinates from the final,
            augmented cloud (as GSNet does).
        with_graspness: load GSNet's per-point graspness (masked-cloud order).
        source: ``'frames'`` (the frame store) or ``'files'`` (the dataset files).
        cache_dir: frame store cache (default ``$MMGRASP_CACHE``).
        with_masked_cloud: also return the whole masked cloud (test time).
    """

    def __init__(self, num_points: int = 15000, outlier: float = 0.02, use_workspace: bool = True,
                 voxel_size: Optional[float] = None, with_graspness: bool = False,
                 source: str = 'frames', cache_dir: Optional[str] = None,
                 with_masked_cloud: bool = False):
        if num_points < 1:
            raise ValueError(f'num_points must be positive, got {num_points}')
        if voxel_size is not None and voxel_size <= 0:
            raise ValueError(f'voxel_size must be positive, got {voxel_size}')
        if source not in SOURCES:
            raise ValueError(f'LoadGraspScene: source={source!r}: expected one of {SOURCES}')
        self.num_points = int(num_points)
        self.outlier = float(outlier)
        self.use_workspace = use_workspace
        self.voxel_size = None if voxel_size is None else float(voxel_size)
        self.with_graspness = with_graspness
        self.source = source
        self.cache_dir = cache_dir
        self.with_masked_cloud = with_masked_cloud

    @property
    def _mask_outlier(self) -> Optional[float]:
        return self.outlier if self.use_workspace else None

    def frame_store(self, reader: GraspSource) -> FrameStore:
        """The frame store of the reader's root and camera, opened (built when missing or
        stale) once a process; forked workers inherit it."""
        key = (reader.root, reader.camera, reader.graspness_dir, self._mask_outlier,
               self.cache_dir or default_cache_dir())
        if key not in _frame_stores:
            _frame_stores[key] = open_frame_store(reader, self._mask_outlier, self.cache_dir)
        return _frame_stores[key]

    def prepare(self, data_root: str, camera: Optional[str] = None,
                reader: Optional[GraspSource] = None) -> List[FrameStore]:
        """With ``source='frames'``, open (and build when needed) the frame store in the main
        process, before workers fork (see :func:`prepared_readers`)."""
        if self.source != 'frames':
            return []
        return [self.frame_store(r) for r in prepared_readers(data_root, camera, reader)]

    def transform(self, results: dict) -> dict:
        reader, scene, frame = results['reader'], results['scene'], results['frame']
        if self.source == 'frames':
            arrays = self.frame_store(reader).frame(scene, frame)
        else:
            arrays = read_frame(reader, scene, frame, self._mask_outlier, self.with_graspness)
        reader.check_frame_objects(scene, arrays.object_ids,
                                   reader.frame_path(scene, 'meta', frame))
        num_masked = len(arrays.pixels)
        if num_masked == 0:
            raise ValueError(f'scene {scene} frame {frame} ({reader.camera}): no point left after '
                             f'masking (depth > 0{" and workspace" if self.use_workspace else ""})')
        key = (getattr(reader, 'root', None), reader.camera)
        if key not in _warned_depth and implausible_depth(arrays.depth.min(),
                                                          arrays.factor_depth, ''):
            _warned_depth.add(key)  # the files are named only then
            warnings.warn(implausible_depth(
                arrays.depth.min(), arrays.factor_depth,
                f"{reader.frame_path(scene, 'depth', frame)} (factor_depth of "
                f"{reader.frame_path(scene, 'meta', frame)})") + ' (said once for this dataset '
                'and camera)')

        rng = results['rng']
        if num_masked >= self.num_points:
            index = rng.choice(num_masked, self.num_points, replace=False)
        else:
            extra = rng.choice(num_masked, self.num_points - num_masked, replace=True)
            index = np.concatenate([np.arange(num_masked), extra])
        index = index.astype(np.int64)

        xyz = pixel_points(np.take(arrays.depth, index), np.take(arrays.pixels, index),
                           arrays.width, arrays.intrinsics, arrays.factor_depth)
        seg = np.take(arrays.seg, index).astype(np.int64)
        results['points'] = np.stack(xyz, axis=-1).astype(np.float32)
        results['seg'] = seg
        results['objectness'] = (seg > 0).astype(np.int64)
        results['point_index'] = index
        if self.with_graspness:
            graspness = aligned_graspness(arrays, reader, scene, frame, self._mask_outlier)
            results['graspness'] = np.take(graspness, index)
        results['object_ids'] = arrays.object_ids
        results['poses'] = arrays.poses
        results['instance_index'] = np.arange(len(arrays.object_ids), dtype=np.int64)
        results['camera_to_table'] = arrays.camera_to_table
        results['intrinsics'] = arrays.intrinsics
        results['factor_depth'] = arrays.factor_depth
        results['num_masked'] = num_masked
        if self.voxel_size is not None:
            results['voxel_size'] = self.voxel_size
        if self.with_masked_cloud:
            results['masked_cloud'] = np.stack(
                pixel_points(arrays.depth, arrays.pixels, arrays.width, arrays.intrinsics,
                             arrays.factor_depth), axis=-1).astype(np.float32)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_points={self.num_points}, '
                f'outlier={self.outlier}, use_workspace={self.use_workspace}, '
                f'voxel_size={self.voxel_size}, with_graspness={self.with_graspness}, '
                f'source={self.source!r}, with_masked_cloud={self.with_masked_cloud})')
