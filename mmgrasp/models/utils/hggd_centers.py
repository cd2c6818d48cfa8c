"""HGGD's 2-D stage after the network: heatmap processing, grid-based centre sampling, the
2-D grasp decode and the lifting of the centres into the camera frame (THU-VCLab/HGGD
``dataset/evaluation.py`` ``anchor_output_process`` / ``detect_2d_grasp`` / ``jit_detect_2d``,
``dataset/pc_dataset_tools.py`` ``select_2d_center`` / ``center2dtopc``).

Images are x-major: a heatmap is (B, W, H) = (B, 640, 360), a pixel (x, y) is ``map[x, y]``,
the raw depth image (B, 1280, 720) in mm. Everything runs batched on the device; the one host
step is the greedy 2-D NMS (one read of a (B, k, k) conflict matrix per batch).
"""
import math
from dataclasses import dataclass
from typing import Dict

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

PROBABILITY_EPS = 1e-6  # sigmoid outputs are clamped to [eps, 1 - eps]


def gaussian_blur(images: Tensor, kernel_size: int = 9, sigma: float = 10.0) -> Tensor:
    """torchvision's ``gaussian_blur`` of float images (B, C, X, Y): the 2-D kernel as the
    outer product of the normalised 1-D Gaussian of ``linspace(-(k-1)/2, (k-1)/2, k)``, reflect
    padding by k // 2, one depthwise convolution (its arithmetic, so the same values)."""
    half = (kernel_size - 1) * 0.5
    x = torch.linspace(-half, half, kernel_size, dtype=images.dtype, device=images.device)
    pdf = torch.exp(-0.5 * (x / sigma).pow(2))
    kernel1d = pdf / pdf.sum()
    kernel = torch.mm(kernel1d[:, None], kernel1d[None, :])
    channels = images.shape[1]
    kernel = kernel.expand(channels, 1, kernel_size, kernel_size)
    pad = kernel_size // 2
    return F.conv2d(F.pad(images, [pad] * 4, mode='reflect'), kernel, groups=channels)


def process_outputs(out: Dict[str, Tensor], sigma: float = 10.0) -> Dict[str, Tensor]:
    """The network's outputs as the decode reads them: the heatmap's clamped sigmoid blurred
    (kernel 9, σ ``sigma``) to (B, W, H); the class maps' clamped sigmoid; θ and depth offsets
    clamped to ±0.5, width offsets to ±1 (all detached)."""
    heat = torch.sigmoid(out['loc_map'].detach()).clamp(PROBABILITY_EPS, 1 - PROBABILITY_EPS)
    return dict(
        heat=gaussian_blur(heat, 9, sigma)[:, 0],
        cls=torch.sigmoid(out['cls_mask'].detach()).clamp(PROBABILITY_EPS, 1 - PROBABILITY_EPS),
        theta=out['theta_offset'].detach().clamp(-0.5, 0.5),
        depth=out['depth_offset'].detach().clamp(-0.5, 0.5),
        width=out['width_offset'].detach().clamp(-1, 1))


@dataclass
class Centers:
    """The chosen 2-D grasps of a batch, flat over its frames (frame-major, best first).

    ``frame`` (C,) int64; ``x``, ``y`` (C,) int64 heatmap pixels; ``theta`` (C,) float64 rad;
    ``depth_offset`` (C,) float64 mm; ``width`` (C,) float64 px at the heatmap's scale;
    ``score`` (C,) the blurred heat at the pixel; ``host_frame`` the frames on the host."""

    frame: Tensor
    x: Tensor
    y: Tensor
    theta: Tensor
    depth_offset: Tensor
    width: Tensor
    score: Tensor
    host_frame: np.ndarray

    def __len__(self) -> int:
        return len(self.frame)

    def select(self, index: np.ndarray) -> 'Centers':
        """The centres at ``index`` (host indices)."""
        device_index = torch.from_numpy(index).to(self.frame.device)
        return Centers(**{f: getattr(self, f)[index if f == 'host_frame' else device_index]
                          for f in self.__dataclass_fields__})


def candidate_pixels(heat: Tensor, count: int, grid: int = 8):
    """Grid-based sampling: the ``count`` best cells of the ``grid``-max-pooled heatmap (B, X,
    Y), best first (equal maxima: lower cell index first), and in each the argmax pixel of the
    cell widened by one pixel on every side. As the reference clips that window to
    [0, X - 1) × [0, Y - 1), the last row and column of the map are never chosen; the first
    maximum in row-major window order wins. Returns x, y (B, count) int64."""
    B, X, Y = heat.shape
    cells = F.max_pool2d(heat[:, None], grid)[:, 0]
    cols = cells.shape[2]
    order = torch.sort(cells.reshape(B, -1), dim=1, descending=True, stable=True).indices
    order = order[:, :min(count, order.shape[1])]
    offsets = torch.arange(-1, grid + 1, device=heat.device)
    xs = (order // cols)[..., None] * grid + offsets  # (B, k, grid + 2)
    ys = (order % cols)[..., None] * grid + offsets
    inside = (((xs >= 0) & (xs < X - 1))[..., :, None] & ((ys >= 0) & (ys < Y - 1))[..., None, :])
    flat = (xs.clamp(0, X - 1)[..., :, None] * Y + ys.clamp(0, Y - 1)[..., None, :])
    values = heat.reshape(B, 1, -1).expand(-1, order.shape[1], -1).gather(
        2, flat.reshape(B, order.shape[1], -1))
    values = values.masked_fill(~inside.reshape(values.shape), float('-inf'))
    best = values.argmax(dim=2)  # the first maximum
    side = grid + 2
    x = xs.gather(2, (best // side)[..., None])[..., 0]
    return x, ys.gather(2, (best % side)[..., None])[..., 0]


def decode_candidates(maps: Dict[str, Tensor], x: Tensor, y: Tensor, grid: int = 8,
                      anchor_width: float = 50.0, anchor_depth: float = 20.0) -> Dict[str, Tensor]:
    """Per candidate pixel (B, k): the heat score and the 2-D grasp of the top-1 θ anchor of
    its cell (equal class scores: the highest anchor index, as the reference's reversed
    ascending argsort): θ = π/K·(a + dθ + 0.5) − π/2, depth offset dz·2·``anchor_depth`` mm,
    width ``anchor_width``·e^dw px."""
    B = x.shape[0]
    frames = torch.arange(B, device=x.device)[:, None]
    score = maps['heat'][frames, x, y]
    gx, gy = torch.div(x, grid, rounding_mode='floor'), torch.div(y, grid, rounding_mode='floor')
    cls = maps['cls'].permute(0, 2, 3, 1)[frames, gx, gy]  # (B, k, K)
    num = cls.shape[-1]
    anchor = (num - 1) - cls.flip(-1).argmax(dim=-1)

    def pick(name: str) -> Tensor:
        return maps[name].permute(0, 2, 3, 1)[frames, gx, gy].gather(2, anchor[..., None])[..., 0]

    step = math.pi / num
    theta = step * (anchor.double() + pick('theta').double() + 0.5) - math.pi / 2
    depth = pick('depth').double() * anchor_depth * 2
    width = anchor_width * torch.exp(pick('width')).double()
    return dict(score=score, theta=theta, depth_offset=depth, width=width)


def greedy_keep(x: Tensor, y: Tensor, theta: Tensor, valid: Tensor, num_centers: int,
                min_distance: float = 8.0, max_angle: float = math.pi / 6) -> Tensor:
    """The reference's greedy 2-D NMS, candidates in order: a valid candidate is kept unless a
    kept one lies closer than ``min_distance`` px with abs(Δθ) (mod π) below ``max_angle``; at most
    ``num_centers`` per frame. One host read of the (B, k, k) conflicts; returns the kept
    (frame, candidate) pairs, frame-major, as a (2, C) int64 array."""
    dx = (x[:, :, None] - x[:, None, :]).double()
    dy = (y[:, :, None] - y[:, None, :]).double()
    close = torch.sqrt(dx * dx + dy * dy) < min_distance
    turn = (theta[:, :, None] - theta[:, None, :]).abs()
    conflict = close & (torch.minimum(math.pi - turn, turn) < max_angle)
    host = torch.cat([conflict.flatten(1), valid], dim=1).cpu().numpy()
    k = x.shape[1]
    pairs = []
    for b, row in enumerate(host):
        blocked = np.zeros(k, dtype=bool)
        conflicts = row[:k * k].reshape(k, k)
        kept = 0
        for i in np.flatnonzero(row[k * k:]):
            if kept >= num_centers:
                break
            if not blocked[i]:
                pairs.append((b, i))
                blocked |= conflicts[i]
                kept += 1
    return np.array(pairs, dtype=np.int64).reshape(-1, 2).T


def select_centers(maps: Dict[str, Tensor], num_centers: int, threshold: float,
                   grid: int = 8, anchor_width: float = 50.0, anchor_depth: float = 20.0,
                   candidates_per_center: int = 10) -> Centers:
    """``detect_2d_grasp``: the 2-D grasps of each frame (``num_centers`` at most; the heat at
    the pixel must exceed ``threshold``), from ``candidates_per_center`` × that many cells."""
    heat = maps['heat']
    x, y = candidate_pixels(heat, candidates_per_center * num_centers, grid)
    grasps = decode_candidates(maps, x, y, grid, anchor_width, anchor_depth)
    keep = greedy_keep(x, y, grasps['theta'], grasps['score'] > threshold, num_centers, grid)
    frame, index = torch.from_numpy(keep).to(x.device)
    return Centers(frame=frame, x=x[frame, index], y=y[frame, index], host_frame=keep[0],
                   **{k: v[frame, index] for k, v in grasps.items()})


def lift_centers(centers: Centers, depths: Tensor, intrinsics: Tensor, heat_size: tuple,
                 window: int = 4, reference_order: bool = False) -> Tensor:
    """``center2dtopc``: (C, 3) float64 camera-frame centres. The heatmap pixel scaled to the
    depth image, z = (raw depth + depth offset) / 1000, x = z / fx · (u − cx), y likewise.
    Where the raw depth is 0: the (lower) median of the positive depths in the window
    [u − 4, u + 4) × [v − 4, v + 4) (clipped to [0, size − 1)) plus the offset, or, with none,
    the mean of the whole depth image (no offset). The reference appends those fixed-up
    centres after the others while its 2-D grasps keep their order (pairing centres with other
    grasps' widths and angles); here every centre stays in its grasp's place, unless
    ``reference_order``: then, per frame, the rows are the centres whose depth was read (in
    grasp order) followed by the fixed-up ones (in grasp order), as the reference's tensor is,
    and row k goes with 2-D grasp k (its region radius, decode and grasp)."""
    B, X, Y = depths.shape
    scale_x, scale_y = X // heat_size[0], Y // heat_size[1]
    u, v = centers.x * scale_x, centers.y * scale_y
    frame = centers.frame
    raw = depths[frame, u, v]
    offsets = torch.arange(-window, window, device=depths.device)
    wu, wv = u[:, None] + offsets, v[:, None] + offsets
    inside = ((wu >= 0) & (wu < X - 1))[:, :, None] & ((wv >= 0) & (wv < Y - 1))[:, None, :]
    patch = depths[frame[:, None, None], wu.clamp(0, X - 1)[:, :, None],
                   wv.clamp(0, Y - 1)[:, None, :]]
    positive = inside & (patch > 0)
    count = positive.flatten(1).sum(1)
    ordered = torch.where(positive, patch, float('inf')).flatten(1).sort(dim=1).values
    median = ordered.gather(1, ((count - 1).clamp(min=0) // 2)[:, None])[:, 0]
    offset = centers.depth_offset
    mean = depths.mean(dim=(1, 2))[frame]
    k = intrinsics[frame]
    fx, fy, cx, cy = k[:, 0, 0], k[:, 1, 1], k[:, 0, 2], k[:, 1, 2]
    z = torch.where(raw != 0, raw + offset, median + offset) / 1000.0
    # where the depth is read, the reference's pixel minus principal point is float32 (a
    # float32 tensor minus a Python float); in the fixed-up rows it is float64
    du = torch.where(raw != 0, (u.float() - cx.float()).double(), u - cx)
    dv = torch.where(raw != 0, (v.float() - cy.float()).double(), v - cy)
    fallback = (mean / 1000.0).float()  # the reference's float32 arithmetic for this case
    xyz = torch.stack([z / fx * du, z / fy * dv, z], dim=1)
    xyz_fallback = torch.stack([(fallback / fx.float() * (u - cx).float()),
                                (fallback / fy.float() * (v - cy).float()), fallback], 1)
    empty = (raw == 0) & (count == 0)
    xyz = torch.where(empty[:, None], xyz_fallback.double(), xyz)
    if reference_order:  # frame-major centres: a stable sort on (frame, fixed-up) per frame
        xyz = xyz[torch.sort(frame * 2 + (raw == 0).long(), stable=True).indices]
    return xyz


def ball_radius(centers: Centers, z: Tensor, intrinsics: Tensor, scale: int) -> Tensor:
    """``get_6d_width``: the predicted width in metres at depth ``z`` (the radius of the
    centre's region): the open point (cx − w/2·cosθ, cy + w/2·sinθ) at the principal point and
    ``scale``·z, back-projected, twice its distance to the centre (w in heatmap px, so the
    depth is scaled to use the full image's intrinsics), rounded to float32 as the reference."""
    k = intrinsics[centers.frame]
    fx, fy, cx, cy = k[:, 0, 0], k[:, 1, 1], k[:, 0, 2], k[:, 1, 2]
    depth = z * 1000.0 * scale / 1000
    half = centers.width / 2
    ox = (cx - half * torch.cos(centers.theta)) - cx
    oy = (cy + half * torch.sin(centers.theta)) - cy
    return (torch.sqrt((depth / fx * ox) ** 2 + (depth / fy * oy) ** 2) * 2).float()
