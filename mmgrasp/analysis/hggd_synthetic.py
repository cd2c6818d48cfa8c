"""Synthetic HGGD batches in the model's input contract (what ``HGGDDataPreprocessor`` gives),
for the cost benchmark (``tools/analysis/benchmark_hggd.py``, at the paper's 640×360) and the
tests (at 64×40): a tilted table plane with boxes, its depth image (x-major, mm, 2% missing
pixels), the sampled cloud, the xyz map (every 16th pixel), 2-D targets and grasp records (the
``HGGDGrasps`` fields and dtypes) at pixels with depth."""
from typing import Optional, Tuple

import numpy as np
import torch

from mmgrasp.structures.data_sample import GraspDataSample


def intrinsics_for(image: Tuple[int, int]) -> np.ndarray:
    """A camera for a depth image twice ``image`` (W, H): the RealSense's at 1280×720."""
    scale = 2 * image[0] / 1280
    return np.array([[927.17 * scale, 0, 651.32 * scale], [0, 927.37 * scale, 349.62 * scale],
                     [0, 0, 1]])


def depth_image(rng: np.random.Generator, image: Tuple[int, int], boxes: int = 2,
                zero: bool = False) -> np.ndarray:
    """(2W, 2H) float32 mm, x-major: a plane at ~0.6 m and ``boxes`` boxes 4-8 cm tall."""
    width, height = 2 * image[0], 2 * image[1]
    x, y = np.meshgrid(np.arange(width), np.arange(height), indexing='ij')
    depth = 600 + 25.6 * x / width + 8 * y / height
    for _ in range(boxes):
        u, v = (rng.uniform(0.15, 0.75, 2) * (width, height)).astype(int)
        du, dv = (rng.uniform(0.1, 0.2, 2) * (width, height)).astype(int)
        depth[u:u + du, v:v + dv] -= rng.uniform(40, 80)
    depth[rng.random(depth.shape) < 0.02] = 0
    return np.zeros_like(depth, np.float32) if zero else depth.astype(np.float32)


def back_project(depth: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(X, Y, 3) camera-frame points (m) of an x-major depth image."""
    u, v = np.meshgrid(np.arange(depth.shape[0]), np.arange(depth.shape[1]), indexing='ij')
    z = depth / 1000.0
    return np.stack([(u - k[0, 2]) / k[0, 0] * z, (v - k[1, 2]) / k[1, 1] * z, z], -1)


def grasp_records(rng: np.random.Generator, depth: np.ndarray, n: int) -> dict:
    """n grasp records at pixels with depth (none where the image has no depth)."""
    u, v = np.nonzero(depth > 0)
    n = n if len(u) else 0
    pick = rng.choice(len(u), n) if n else np.zeros(0, int)
    return dict(centers_2d=np.stack([u[pick], v[pick]], 1).astype(np.float64).reshape(-1, 2),
                opens_2d=np.zeros((n, 2)),
                thetas_rad=rng.uniform(-np.pi, np.pi, n).astype(np.float32),
                gammas_rad=rng.uniform(-1.2, 1.2, n), betas_rad=rng.uniform(-1.2, 1.2, n),
                widths_2d=rng.uniform(20, 60, n).astype(np.float32),
                heights_2d=np.full(n, 20, np.float32),
                scores_from_6d=np.ones(n, np.float32), object_ids=np.zeros(n, np.int32),
                center_z_depths=depth[u[pick], v[pick]].astype(np.float64))


def make_batch(seed: int = 0, batch: int = 2, image: Tuple[int, int] = (64, 40),
               points: int = 3000, grasps: int = 300, zero_depth: Optional[int] = None,
               no_grasps: Optional[int] = None):
    """(inputs, data_samples) of a training batch; frame ``zero_depth`` has no depth at all,
    frame ``no_grasps`` no grasp record."""
    rng = np.random.default_rng(seed)
    k = intrinsics_for(image)
    depths, clouds, maps, records = [], [], [], []
    for b in range(batch):
        depth = depth_image(rng, image, zero=b == zero_depth)
        xyz = back_project(depth, k)
        valid = xyz[depth > 0]
        cloud = (valid[rng.choice(len(valid), points, replace=len(valid) < points)]
                 if len(valid) else np.zeros((points, 3)))
        depths.append(depth)
        clouds.append(cloud)
        maps.append(xyz[::16, ::16].transpose(2, 0, 1))
        records.append(grasp_records(rng, depth, 0 if b == no_grasps else grasps))
    W, H = image
    loc = np.zeros((batch, 1, W, H), np.float32)
    for b in range(batch):
        for u, v in rng.integers(0, (W, H), (6, 2)):
            loc[b, 0, max(u - 2, 0):u + 3, max(v - 2, 0):v + 3] = 0.5
            loc[b, 0, u, v] = 1.0
    counts = rng.integers(0, 3, (batch, 6, W // 8, H // 8))
    targets = dict(loc_map=torch.from_numpy(loc),
                   cls_mask=torch.from_numpy(2 / (1 + np.exp(-counts))).float() - 1,
                   **{name: torch.from_numpy(rng.normal(0, 0.3, counts.shape)).float()
                      * torch.from_numpy(counts > 0)
                      for name in ('theta_offset', 'depth_offset', 'width_offset')})
    image_in = np.stack([np.concatenate([np.clip(d[::2, ::2] / 1000 - 0.6, -1, 1)[None],
                                         rng.random((3, W, H))]) for d in depths])
    inputs = dict(images=torch.from_numpy(image_in).float(),
                  depths=torch.from_numpy(np.stack(depths)),
                  points=torch.from_numpy(np.stack(clouds)).float(),
                  xyz_maps=torch.from_numpy(np.stack(maps)).float(),
                  intrinsics=torch.from_numpy(np.stack([k] * batch)),
                  targets=targets,
                  grasps=[{name: torch.from_numpy(v) for name, v in r.items()} for r in records])
    samples = [GraspDataSample(metainfo=dict(scene=100 + b, frame=b, camera='realsense',
                                             epoch=0, sample_idx=b)) for b in range(batch)]
    return inputs, samples
