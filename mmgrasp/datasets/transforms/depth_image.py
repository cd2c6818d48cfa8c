"""A depth image from a camera (not a dataset frame) as a sampled point cloud."""
from typing import Optional

import numpy as np
from mmcv.transforms import BaseTransform

from mmgrasp.storage.frames.store import pixel_points
from mmgrasp.registry import TRANSFORMS

#: Nearest reading a depth camera of these datasets can return, metres. Intel's D400-series
#: datasheet gives the D435's minimum depth (Min-Z) as ~0.105 m at its lowest resolution
#: (~0.28 m at 1280×720) and the D415's as ~0.16 m (~0.45 m); Microsoft's Azure Kinect hardware
#: specification starts its depth modes at 0.25 m; Zivid cameras start farther still. A reading
#: nearer than this means a wrong ``factor_depth`` (millimetres read with factor 10000 put the
#: table at 6-9 cm, and the models return 0-1 grasps), not a scene.
MIN_PLAUSIBLE_DEPTH = 0.1


def implausible_depth(nearest_raw: float, factor_depth: float, where: str) -> Optional[str]:
    """A warning when the nearest valid reading (raw units) is nearer than any camera of the
    datasets sees (:data:`MIN_PLAUSIBLE_DEPTH`), else None."""
    nearest = float(nearest_raw) / float(factor_depth)
    if nearest >= MIN_PLAUSIBLE_DEPTH:
        return None
    return (f'{where}: the nearest depth reading is {nearest:.3f} m (raw {nearest_raw:g} / '
            f'factor_depth {factor_depth:g}), nearer than a depth camera sees '
            f'({MIN_PLAUSIBLE_DEPTH:g} m; RealSense D435 Min-Z ~0.1-0.28 m, Azure Kinect '
            f'0.25 m): check factor_depth (raw depth / factor_depth must be metres; '
            f'GraspNet-1Billion PNGs are millimetres, factor_depth 1000)')


def sample_indices(rng: np.random.Generator, count: int, num_points: int) -> np.ndarray:
    """(num_points,) int64 indices into ``count`` (> 0) items: drawn without replacement, or
    every item and the rest drawn with replacement when there are fewer (LoadGraspScene's
    rule)."""
    if count >= num_points:
        index = rng.choice(count, num_points, replace=False)
    else:
        extra = rng.choice(count, num_points - count, replace=True)
        index = np.concatenate([np.arange(count), extra])
    return index.astype(np.int64)


@TRANSFORMS.register_module()
class LoadDepthImage(BaseTransform):
    """Back-project a raw depth image and sample ``num_points`` points, drawing exactly as
    :class:`LoadGraspScene` does (pixels with depth > 0 and inside ``workspace_mask``, row-major;
    ``num_points`` chosen without replacement, or all and the rest with replacement), so a
    dataset frame given here with its workspace mask yields the same sample.

    Required Keys:

    - depth (np.uint16, (H, W)): raw depth, metres × factor_depth
    - intrinsics (np.float64, (3, 3))
    - factor_depth (float)
    - rng (np.random.Generator)
    - workspace_mask (bool (H, W) or None): pixels to keep; None keeps every reading

    Added Keys:

    - points (np.float32, (N, 3)): camera frame, metres
    - point_index (np.int64, (N,)): row of each point in the masked cloud
    - num_masked (int)
    - masked_cloud (np.float32, (num_masked, 3)): only with ``with_masked_cloud``

    Args:
        num_points: points per sample.
        with_masked_cloud: also return the whole masked cloud (the collision filter's).
    """

    def __init__(self, num_points: int = 15000, with_masked_cloud: bool = False):
        if num_points < 1:
            raise ValueError(f'num_points must be positive, got {num_points}')
        self.num_points = num_points
        self.with_masked_cloud = with_masked_cloud

    def transform(self, results: dict) -> dict:
        depth, mask = results['depth'], results.get('workspace_mask')
        keep = depth.reshape(-1) > 0
        if mask is not None:
            keep &= mask.reshape(-1)
        pixels = np.flatnonzero(keep)
        if len(pixels) == 0:
            raise ValueError('no point left: the depth image has no reading'
                             + (' inside the mask' if mask is not None else ''))
        index = sample_indices(results['rng'], len(pixels), self.num_points)
        values = np.take(depth.reshape(-1), pixels)
        width, intrinsics, factor = depth.shape[1], results['intrinsics'], results['factor_depth']
        xyz = pixel_points(np.take(values, index), np.take(pixels, index), width, intrinsics,
                           factor)
        results['points'] = np.stack(xyz, axis=-1).astype(np.float32)
        results['point_index'] = index
        results['num_masked'] = len(pixels)
        if self.with_masked_cloud:
            results['masked_cloud'] = np.stack(
                pixel_points(values, pixels, width, intrinsics, factor), axis=-1).astype(np.float32)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_points={self.num_points}, '
                f'with_masked_cloud={self.with_masked_cloud})')
