"""Synthetic HGGD batches in the model's input contract (what HGGDDataPreprocessor gives), at a
small image size: a table plane with boxes seen by a camera, its depth image (x-major, mm), the
sampled cloud, the xyz map, 2-D targets and grasp records on the boxes."""
from typing import Optional

import numpy as np
import torch

from mmgrasp.structures.data_sample import GraspDataSample

IMAGE = (64, 40)  # (W, H) of the network's input; the depth image is twice that
INTRINSICS = np.array([[110.0, 0, 63.2], [0, 109.0, 40.5], [0, 0, 1]])


def depth_image(rng: np.random.Generator, boxes: int = 2, zero: bool = False) -> np.ndarray:
    """(2W, 2H) float32 mm, x-major: a plane at ~0.6 m and ``boxes`` boxes 4-8 cm tall."""
    width, height = 2 * IMAGE[0], 2 * IMAGE[1]
    x, y = np.meshgrid(np.arange(width), np.arange(height), indexing='ij')
    depth = 600 + 0.2 * x + 0.1 * y
    for _ in range(boxes):
        u, v = rng.integers(20, width - 30), rng.integers(15, height - 25)
        du, dv = rng.integers(12, 24, 2)
        depth[u:u + du, v:v + dv] -= rng.uniform(40, 80)
    depth[rng.random(depth.shape) < 0.02] = 0  # missing pixels
    return np.zeros_like(depth, np.float32) if zero else depth.astype(np.float32)


def back_project(depth: np.ndarray) -> np.ndarray:
    """(2W, 2H, 3) camera-frame points (m) of a depth image."""
    u, v = np.meshgrid(np.arange(depth.shape[0]), np.arange(depth.shape[1]), indexing='ij')
    z = depth / 1000.0
    return np.stack([(u - INTRINSICS[0, 2]) / INTRINSICS[0, 0] * z,
                     (v - INTRINSICS[1, 2]) / INTRINSICS[1, 1] * z, z], -1)


def grasp_records(rng: np.random.Generator, depth: np.ndarray, n: int) -> dict:
    """n grasp records (the HGGDGrasps fields and dtypes) at pixels with depth."""
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


def make_batch(seed: int = 0, batch: int = 2, points: int = 3000, grasps: int = 300,
               zero_depth: Optional[int] = None, no_grasps: Optional[int] = None):
    """(inputs, data_samples) of a training batch; frame ``zero_depth`` has no depth at all,
    frame ``no_grasps`` no grasp record."""
    rng = np.random.default_rng(seed)
    depths, clouds, maps, records = [], [], [], []
    for b in range(batch):
        depth = depth_image(rng, zero=b == zero_depth)
        xyz = back_project(depth)
        valid = xyz[depth > 0]
        cloud = (valid[rng.choice(len(valid), points, replace=len(valid) < points)]
                 if len(valid) else np.zeros((points, 3)))
        depths.append(depth)
        clouds.append(cloud)
        maps.append(xyz[::16, ::16].transpose(2, 0, 1))
        records.append(grasp_records(rng, depth, 0 if b == no_grasps else grasps))
    W, H = IMAGE
    loc = np.zeros((batch, 1, W, H), np.float32)
    for b in range(batch):
        for u, v in rng.integers(0, (W, H), (6, 2)):
            loc[b, 0, max(u - 2, 0):u + 3, max(v - 2, 0):v + 3] = 0.5
            loc[b, 0, u, v] = 1.0
    counts = rng.integers(0, 3, (batch, 6, W // 8, H // 8))
    targets = dict(loc_map=torch.from_numpy(loc),
                   cls_mask=torch.from_numpy(2 / (1 + np.exp(-counts)) - 1).float(),
                   **{k: torch.from_numpy(rng.normal(0, 0.3, counts.shape)).float()
                      * torch.from_numpy(counts > 0)
                      for k in ('theta_offset', 'depth_offset', 'width_offset')})
    image = np.stack([np.concatenate([np.clip(d[::2, ::2] / 1000 - 0.6, -1, 1)[None],
                                      rng.random((3, W, H))]) for d in depths])
    inputs = dict(images=torch.from_numpy(image).float(),
                  depths=torch.from_numpy(np.stack(depths)),
                  points=torch.from_numpy(np.stack(clouds)).float(),
                  xyz_maps=torch.from_numpy(np.stack(maps)).float(),
                  intrinsics=torch.from_numpy(np.stack([INTRINSICS] * batch)),
                  targets=targets,
                  grasps=[{k: torch.from_numpy(v) for k, v in r.items()} for r in records])
    samples = [GraspDataSample(metainfo=dict(scene=100 + b, frame=b, camera='realsense',
                                             epoch=0, sample_idx=b)) for b in range(batch)]
    return inputs, samples


def small_hggd(**overrides):
    """An HGGD for the small images: regions of 32 points, a 5-px width anchor (about 5 cm
    balls at 0.6 m), a few centres."""
    from mmgrasp.models.detectors import HGGD
    cfg = dict(train_centers=16, test_centers=8, group_points=32, min_points=4,
               anchor_width=5.0, heat_threshold=0.0, data_preprocessor=dict(
                   type='GraspDataPreprocessor'))
    cfg.update(overrides)
    return HGGD(**cfg)
