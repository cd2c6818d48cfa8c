"""Loading one GraspNet-1Billion frame as a sampled point cloud.

The cloud, the workspace mask and the sampling follow graspnet-baseline's ``get_data_label``
(``create_point_cloud_from_depth_image``, ``get_workspace_mask``) exactly, because GSNet's
graspness files hold one row per point of that masked cloud: any other mask misaligns them.
"""
from typing import Optional

import numpy as np
from mmcv.transforms import BaseTransform

from mmgrasp.datasets.graspnet_reader import DatasetFileError
from mmgrasp.registry import TRANSFORMS


def depth_to_cloud(depth: np.ndarray, intrinsics: np.ndarray, factor_depth: float) -> np.ndarray:
    """(H, W, 3) float64 camera-frame cloud of a raw depth image, in the image layout.

    z = d / factor_depth, x = (u - cx) z / fx, y = (v - cy) z / fy, with u the column and v the
    row; pixels without a reading (d = 0) land on the camera origin.
    """
    h, w = depth.shape
    fx, fy = intrinsics[0, 0], intrinsics[1, 1]
    cx, cy = intrinsics[0, 2], intrinsics[1, 2]
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    z = depth / factor_depth
    return np.stack([(u - cx) * z / fx, (v - cy) * z / fy, z], axis=-1)


def workspace_mask(cloud: np.ndarray, seg: np.ndarray, camera_to_table: np.ndarray,
                   outlier: float) -> np.ndarray:
    """(H, W) bool: points strictly inside the table-frame box of the foreground, grown by
    ``outlier`` per side.

    As in the reference, the box is taken over every pixel with seg > 0, including those without a
    depth reading (they sit on the camera origin); callers also require depth > 0.
    """
    # Per axis, elementwise: a BLAS product of (H·W, 3) by (3, 3) is several times slower.
    rotation, translation = camera_to_table[:3, :3], camera_to_table[:3, 3]
    foreground = seg > 0
    if not foreground.any():
        raise ValueError('the segmentation has no foreground pixel: the workspace box is undefined')
    mask = np.ones(seg.shape, dtype=bool)
    for axis in range(3):
        coord = (rotation[axis, 0] * cloud[..., 0] + rotation[axis, 1] * cloud[..., 1]
                 + rotation[axis, 2] * cloud[..., 2] + translation[axis])
        inside = coord[foreground]
        mask &= coord > inside.min() - outlier
        mask &= coord < inside.max() + outlier
    return mask


@TRANSFORMS.register_module()
class LoadGraspScene(BaseTransform):
    """Load depth, segmentation and meta of a frame and sample a fixed-size point cloud.

    The masked cloud keeps pixels with depth > 0 (and inside the workspace box when
    ``use_workspace``) in row-major image order. If it has at least ``num_points`` points,
    ``num_points`` are chosen without replacement; otherwise all of them are kept and the rest
    drawn with replacement. All objects of the meta file are kept here; the label transform drops
    those with too few sampled points.

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
    - object_ids (np.int64, (M,)): 0-based, in meta order
    - poses (np.float32, (M, 3, 4)): model -> camera
    - instance_index (np.int64, (M,)): position in meta ``cls_indexes`` (collision arrays)
    - camera_to_table (np.float64, (4, 4))
    - intrinsics (np.float64, (3, 3))
    - factor_depth (float)
    - num_masked (int): points in the masked cloud
    - voxel_size (float): only when ``voxel_size`` is set

    Args:
        num_points: points per sample (GSNet 15000, graspnet-baseline 20000).
        outlier: margin of the workspace box per side, metres.
        use_workspace: apply the workspace mask (every reference recipe trains with it).
        voxel_size: recorded for PackGraspInputs, which derives voxel coordinates from the final,
            augmented cloud (as GSNet does).
        with_graspness: load GSNet's per-point graspness (masked-cloud order).
    """

    def __init__(self, num_points: int = 15000, outlier: float = 0.02, use_workspace: bool = True,
                 voxel_size: Optional[float] = None, with_graspness: bool = False):
        if num_points < 1:
            raise ValueError(f'num_points must be positive, got {num_points}')
        if voxel_size is not None and voxel_size <= 0:
            raise ValueError(f'voxel_size must be positive, got {voxel_size}')
        self.num_points = int(num_points)
        self.outlier = float(outlier)
        self.use_workspace = use_workspace
        self.voxel_size = None if voxel_size is None else float(voxel_size)
        self.with_graspness = with_graspness

    def transform(self, results: dict) -> dict:
        reader, scene, frame = results['reader'], results['scene'], results['frame']
        where = f'scene {scene} frame {frame} ({reader.camera})'
        depth = reader.load_depth(scene, frame)
        seg = reader.load_segmentation(scene, frame)
        meta = reader.load_meta(scene, frame)
        camera_to_table = reader.trajectory(scene).camera_to_table(frame).astype(np.float64)
        if seg.shape != depth.shape:
            raise ValueError(f'{where}: segmentation {seg.shape} and depth {depth.shape} differ '
                             f'in size')

        cloud = depth_to_cloud(depth, meta.intrinsics, meta.factor_depth)
        mask = depth > 0
        if self.use_workspace:
            try:
                mask &= workspace_mask(cloud, seg, camera_to_table, self.outlier)
            except ValueError as exc:
                raise ValueError(f'{where}: {exc}') from exc
        masked_pixels = np.flatnonzero(mask)  # row-major: the order of the reference's cloud[mask]
        num_masked = len(masked_pixels)
        if num_masked == 0:
            raise ValueError(f'{where}: no point left after masking (depth > 0'
                             f'{" and workspace" if self.use_workspace else ""})')

        rng = results['rng']
        if num_masked >= self.num_points:
            index = rng.choice(num_masked, self.num_points, replace=False)
        else:
            extra = rng.choice(num_masked, self.num_points - num_masked, replace=True)
            index = np.concatenate([np.arange(num_masked), extra])
        index = index.astype(np.int64)

        pixels = masked_pixels[index]
        seg_sampled = seg.reshape(-1)[pixels].astype(np.int64)
        results['points'] = cloud.reshape(-1, 3)[pixels].astype(np.float32)
        results['seg'] = seg_sampled
        results['objectness'] = (seg_sampled > 0).astype(np.int64)
        results['point_index'] = index
        if self.with_graspness:
            graspness = reader.load_graspness(scene, frame)
            if len(graspness) != num_masked:
                raise DatasetFileError(
                    reader.graspness_path(scene, frame),
                    f'has {len(graspness)} rows but the masked cloud of {where} has {num_masked} '
                    f'points (depth > 0 & workspace, outlier {self.outlier})')
            results['graspness'] = graspness[index]
        results['object_ids'] = meta.object_ids.astype(np.int64)
        results['poses'] = meta.poses.astype(np.float32)
        results['instance_index'] = np.arange(len(meta.object_ids), dtype=np.int64)
        results['camera_to_table'] = camera_to_table
        results['intrinsics'] = meta.intrinsics
        results['factor_depth'] = meta.factor_depth
        results['num_masked'] = num_masked
        if self.voxel_size is not None:
            results['voxel_size'] = self.voxel_size
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_points={self.num_points}, '
                f'outlier={self.outlier}, use_workspace={self.use_workspace}, '
                f'voxel_size={self.voxel_size}, with_graspness={self.with_graspness})')
