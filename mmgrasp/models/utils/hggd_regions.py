"""HGGD's 3-D inputs: image features carried to the scene points by kNN, and the local regions
around the lifted centres (THU-VCLab/HGGD ``dataset/pc_dataset_tools.py`` ``feature_fusion``,
``get_group_pc``), on mmgrasp's point ops (:mod:`mmgrasp.ops.point_ops`).

Random draws (the region's FPS start point, the resampling of small regions, the 5e-4 m jitter)
come from one generator per frame (training: seed, epoch, sample index; test: seed, scene,
camera, frame), so a frame's regions do not depend on the rest of its batch.
"""
from typing import List, Tuple

import numpy as np
import torch
from torch import Tensor

from mmgrasp.ops.point_ops import furthest_point_sample, knn


def fuse_features(points: Tensor, features: Tensor, xyz_maps: Tensor, k: int = 8) -> Tensor:
    """(B, N, C): per scene point the channel-wise max of the image features (B, C, w, h) at
    its ``k`` nearest points of the xyz map (B, 3, w, h; zero-depth cells, at the origin,
    included, as the reference)."""
    B, C = features.shape[:2]
    ref = xyz_maps.flatten(2).transpose(1, 2).contiguous()
    _, idx = knn(ref, points.contiguous(), k)
    flat = features.flatten(2).transpose(1, 2)  # (B, w·h, C)
    fused = None
    for j in range(k):  # a running max: k (B, N, C) gathers, not one (B, N, k, C)
        picked = flat.gather(1, idx[..., j, None].expand(-1, -1, C))
        fused = picked if fused is None else torch.maximum(fused, picked)
    return fused


def crop_regions(cloud: Tensor, features: Tensor, centers: Tensor, frame: Tensor,
                 frame_host: np.ndarray, radius: Tensor, generators: List[torch.Generator],
                 num_points: int = 512, min_points: int = 32,
                 jitter: float = 5e-4) -> Tuple[Tensor, np.ndarray]:
    """``get_group_pc``: the region of each centre, (V, num_points, 3 + C) float32 (xyz
    relative to the centre, then the fused features), and the kept centres' indices (V,) on
    the host.
    ``frame`` (C,) is each centre's frame, ``frame_host`` the same on the host.

    A region is the cloud within ``radius`` (float64 distances) of its centre. With at least
    ``num_points`` points it is FPS-sampled to ``num_points``, starting at a random point of
    the region (the reference's ``random_start_point=True``: the region's points are rotated
    to put a uniformly drawn one first, as mmgrasp's FPS starts at the first); with more than
    ``min_points`` it is resampled with replacement; otherwise the centre is dropped. Every
    point gets N(0, ``jitter``) on xyz before the FPS (after the resampling). One host read:
    the region sizes.
    """
    B, N = cloud.shape[:2]
    planes = cloud.transpose(1, 2)
    d2 = 0
    for axis in range(3):  # (C, N) float64 temporaries, not one (C, N, 3)
        d2 = d2 + (planes[frame, axis].double() - centers[:, axis, None]) ** 2
    inside = torch.sqrt(d2) < radius.double()[:, None]
    del d2
    counts = inside.sum(1)
    host = counts.cpu().numpy()
    keep_host = np.flatnonzero(host > min_points)
    if len(keep_host) == 0:
        return cloud.new_zeros(0, num_points, 3 + features.shape[2]), keep_host
    keep = torch.from_numpy(keep_host).to(cloud.device)
    width = max(num_points, int(host[keep_host].max()))
    frame, count = frame[keep], counts[keep]
    order = torch.sort((~inside[keep]).to(torch.uint8), dim=1, stable=True).indices[:, :width]
    start, picks, noise, noise_out = _draws(frame_host[keep_host], generators, width, num_points,
                                            cloud.device)
    slots = torch.arange(width, device=cloud.device)
    in_region = slots < count[:, None]
    count_f = count[:, None].to(torch.float64)
    first = (start[:, None] * count_f).long()  # uniform in [0, count)
    rotated = torch.where(in_region, (slots + first) % count[:, None].clamp(min=1), slots)
    order = order.gather(1, rotated)
    flat_cloud = cloud.reshape(B * N, 3)
    xyz = flat_cloud[frame[:, None] * N + order] + noise * jitter
    large = count >= num_points
    fps = furthest_point_sample(xyz, num_points, in_region)
    positions = torch.where(large[:, None], fps, (picks * count_f).long())
    index = order.gather(1, positions)
    point = frame[:, None] * N + index
    sampled = xyz.gather(1, positions[..., None].expand(-1, -1, 3))
    chosen = torch.where(large[:, None, None], sampled, flat_cloud[point] + noise_out * jitter)
    local = (chosen.double() - centers[keep][:, None]).float()
    feats = features.reshape(B * N, -1)[point]
    return torch.cat([local, feats], dim=2), keep_host


def _draws(frames: np.ndarray, generators: List[torch.Generator], width: int, num_points: int,
           device: torch.device) -> List[Tensor]:
    """Per kept region (``frames``: their frames on the host, frame-major), from its frame's
    generator, in this order: the start (V,) and resampling (V, num_points) uniforms, the
    jitter of the region (V, width, 3) and of the resampled points (V, num_points, 3)."""
    parts = [[], [], [], []]
    for b, n in enumerate(np.bincount(frames, minlength=len(generators)).tolist()):
        if n:
            g = generators[b]
            parts[0].append(torch.rand(n, generator=g, device=device, dtype=torch.float64))
            parts[1].append(torch.rand(n, num_points, generator=g, device=device,
                                       dtype=torch.float64))
            parts[2].append(torch.randn(n, width, 3, generator=g, device=device))
            parts[3].append(torch.randn(n, num_points, 3, generator=g, device=device))
    return [torch.cat(p) for p in parts]
