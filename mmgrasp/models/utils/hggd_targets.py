"""HGGD's 2-D training targets, rendered on the device for a whole batch.

The reference (THU-VCLab/HGGD ``dataset/base_grasp_dataset.py``: ``draw_gaussian``,
``get_anchor_map``) renders them per frame in the loader with a Python loop over labels. Here
the labels of every frame of a batch are one flat list (``frames[k]`` says whose), and the maps
are scattered in one pass, in label order where the order matters. The rules, all in the
reference's x-major layout (maps indexed ``[x, y]``) and at the network's input scale:

- Labels are the worker's rectangles (:class:`~mmgrasp.datasets.transforms.LoadHGGDGrasps`):
  integer centres (the mean of ``RectGrasp.points``' int32 corners, halved, truncated),
  widths from those corners, wrapped θ (float32), centre depths (mm).
- ``loc_map``: a 21 × 21 Gaussian (σ = 21 / 6, peak 1, float64 ``gaussian2D`` values) at every
  centre the greedy 8-px rule kept (decided in the worker), their maximum where they overlap.
- Anchor maps, per label with its cell ``(x // 8, y // 8)`` inside the grid: θ clipped to
  ±(π/2 − 1e-8), ``g, r = divmod(θ + π/2, π/6)``; ``theta_offset = r / (π/6) − 0.5``;
  ``width_offset = log(width / 50)``; ``depth_offset = clip((z − d) / 40, ±0.5)`` with ``d``
  the median of the raw depth (mm) in the 4 × 4 window ``[x' − 2, x' + 2) × [y' − 2, y' + 2)``
  at ``x' = x · W // W_in``, ``y' = y · W // W_in`` (the reference scales both by the widths),
  clipped to ``[0, W − 1) × [0, H − 1)``; labels with ``d <= 0`` add no depth offset but count.
  Offsets are summed per (anchor, cell) in float64 in label order and divided by the count;
  ``cls_mask = 2 / (1 + e^-count) − 1``.
- The "maintain" rule: when a label without depth arrives at a cell that already holds labels
  and a positive depth sum, the sum is scaled by ``count / (count − 1)`` (the reference's
  ``base_grasp_dataset.py:231-235``). It depends on the running sum, so it is applied event by
  event: ``max_events`` (counted by the worker, so known on the host) passes over the cells,
  four elementwise ops each. A cell's valid offsets between two events are summed first and
  then added to the running sum: the same float64 terms, associated differently than the
  reference's one-by-one sum in cells that have an event (equal in float32 in every golden
  case).
"""
import functools
import math
from typing import Dict, Tuple

import numpy as np
import torch
from torch import Tensor

#: The reference's ``sigma=10``, used as the Gaussian's radius (21 × 21, σ = 21 / 6).
HEATMAP_RADIUS = 10
#: Half the side of the raw-depth window whose median is a label's observed depth.
DEPTH_WINDOW = 2


@functools.lru_cache(maxsize=None)
def gaussian_kernel(radius: int = HEATMAP_RADIUS) -> np.ndarray:
    """The reference's ``gaussian2D((2r + 1, 2r + 1), sigma=(2r + 1) / 6)``: float64, peak 1,
    values below ``eps · max`` set to 0. Cached; do not modify."""
    diameter = 2 * radius + 1
    sigma = diameter / 6
    m = (diameter - 1.) / 2.
    y, x = np.ogrid[-m:m + 1, -m:m + 1]
    h = np.exp(-(x * x + y * y) / (2 * sigma * sigma))
    h[h < np.finfo(h.dtype).eps * h.max()] = 0
    return h


@functools.lru_cache(maxsize=None)
def _square_grid(low: int, high: int) -> np.ndarray:
    side = np.arange(low, high)
    return np.stack(np.meshgrid(side, side, indexing='ij')).reshape(2, -1)


def _square_offsets(low: int, high: int, device: torch.device) -> Tuple[Tensor, Tensor]:
    """(n²,) x and y offsets of the square ``[low, high)²``, x the slower (one upload)."""
    offsets = torch.from_numpy(_square_grid(low, high)).to(device)
    return offsets[0], offsets[1]


def render_heatmap(centers: Tensor, frames: Tensor, num_frames: int, size: Tuple[int, int],
                   radius: int = HEATMAP_RADIUS) -> Tensor:
    """(B, 1, W_in, H_in) float32 ``loc_map``: the maximum of the Gaussians at ``centers``
    ((K, 2) integer (x, y), the ones the 8-px rule kept) of frame ``frames`` ((K,) int64)."""
    width, height = size
    device = centers.device
    kernel = torch.from_numpy(gaussian_kernel(radius).astype(np.float32)).to(device).reshape(-1)
    dx, dy = _square_offsets(-radius, radius + 1, device)
    px, py = centers[:, 0:1].long() + dx, centers[:, 1:2].long() + dy  # (K, 441)
    inside = (px >= 0) & (px < width) & (py >= 0) & (py < height)
    index = torch.where(inside, (frames[:, None] * width + px) * height + py, 0)
    values = torch.where(inside, kernel, 0.)
    heat = torch.zeros(num_frames * width * height, device=device)
    heat.scatter_reduce_(0, index.reshape(-1), values.reshape(-1), 'amax')
    return heat.view(num_frames, 1, width, height)


def window_medians(depth: Tensor, frames: Tensor, x: Tensor, y: Tensor,
                   half: int = DEPTH_WINDOW) -> Tensor:
    """(K,) float32 ``np.median(depth[f, x − h:x + h, y − h:y + h])`` with the reference's
    clipping (columns ``[max(0, x − h), min(W − 1, x + h))``, rows likewise with H): the middle
    value of the sorted window, or the float32 mean of the two middle ones. ``depth``
    (B, W, H) x-major float32; an empty window gives +inf."""
    _, width, height = depth.shape
    dx, dy = _square_offsets(-half, half, depth.device)
    cols, rows = x[:, None] + dx, y[:, None] + dy  # (K, 4h²)
    inside = (cols >= 0) & (cols < torch.clamp(x + half, max=width - 1)[:, None]) \
        & (rows >= 0) & (rows < torch.clamp(y + half, max=height - 1)[:, None])
    flat = (frames[:, None] * width + cols.clamp(0, width - 1)) * height + rows.clamp(0, height - 1)
    values = torch.where(inside, depth.reshape(-1)[flat], math.inf)
    ordered = values.sort(dim=1).values
    count = inside.sum(1, keepdim=True)
    low = ordered.gather(1, ((count - 1) // 2).clamp(min=0))
    high = ordered.gather(1, (count // 2).clamp(max=values.shape[1] - 1))
    return ((low + high) / 2).squeeze(1)


def render_anchor_maps(centers: Tensor, thetas: Tensor, widths: Tensor, depths: Tensor,
                       frames: Tensor, raw_depth: Tensor, size: Tuple[int, int],
                       max_events: int, ratio: int = 8, anchor_k: int = 6,
                       anchor_w: float = 50., anchor_z: float = 20.) -> Dict[str, Tensor]:
    """The reference's ``get_anchor_map`` for a batch: ``cls_mask``, ``theta_offset``,
    ``depth_offset``, ``width_offset``, each (B, anchor_k, W_in // ratio, H_in // ratio)
    float32.

    Args:
        centers: (K, 2) integer (x, y) label centres at the input scale.
        thetas: (K,) float32 wrapped θ; widths: (K,) float64 at the input scale;
            depths: (K,) float64 centre depths, mm. Labels in order, frame after frame or
            mixed: only the order within a frame matters.
        frames: (K,) int64 frame of each label.
        raw_depth: (B, W, H) float32 x-major raw depth in mm at the native size.
        size: (W_in, H_in) the input size.
        max_events: at least the number of "maintain" events of any (anchor, cell): labels
            without depth that are not the first of their (anchor, cell) (the worker counts
            them). A smaller value raises an index error.
    """
    num_frames, width, _ = raw_depth.shape
    cells_x, cells_y = size[0] // ratio, size[1] // ratio
    device = centers.device
    cx, cy = centers[:, 0].long(), centers[:, 1].long()
    u = torch.div(cx, ratio, rounding_mode='floor')
    v = torch.div(cy, ratio, rounding_mode='floor')
    inside = (u >= 0) & (v >= 0) & (u < cells_x) & (v < cells_y)

    step = math.pi / anchor_k
    theta = thetas.double().clamp(-math.pi / 2 + 1e-8, math.pi / 2 - 1e-8) + math.pi / 2
    anchor = torch.div(theta, step, rounding_mode='floor').long()  # numpy's divmod, exactly
    theta_offset = torch.remainder(theta, step) / step - 0.5
    width_offset = torch.log(widths / anchor_w)

    observed = window_medians(raw_depth, frames,
                              torch.div(cx * width, size[0], rounding_mode='floor'),
                              torch.div(cy * width, size[0], rounding_mode='floor'),
                              DEPTH_WINDOW)
    has_depth = inside & (observed > 0)
    depth_offset = ((depths - observed.double()) / (anchor_z * 2)).clamp(-0.5, 0.5)

    groups = num_frames * anchor_k * cells_x * cells_y  # one more: labels outside the grid
    key = torch.where(inside, ((frames * anchor_k + anchor) * cells_x + u) * cells_y + v, groups)
    zeros = torch.zeros(groups + 1, dtype=torch.float64, device=device)
    count = zeros.index_add(0, key, torch.ones_like(theta_offset))
    theta_sum = zeros.index_add(0, key, theta_offset)
    width_sum = zeros.index_add(0, key, width_offset)
    depth_sum = _maintained_depth_sums(key, has_depth, inside, depth_offset, groups + 1,
                                       max_events)

    divisor = count + (count == 0)
    shape = (num_frames, anchor_k, cells_x, cells_y)
    maps = dict(cls_mask=class_mask(count), theta_offset=theta_sum / divisor,
                depth_offset=depth_sum / divisor, width_offset=width_sum / divisor)
    return {name: m[:-1].float().view(shape) for name, m in maps.items()}


def class_mask(count: Tensor) -> Tensor:
    """``2 / (1 + e^-count) - 1``: 0.4621 for one label, 0.7616 for two."""
    return 2 / (1 + torch.exp(-count)) - 1


def _maintained_depth_sums(key: Tensor, has_depth: Tensor, inside: Tensor, offsets: Tensor,
                           groups: int, max_events: int) -> Tensor:
    """Per group, the reference's sequential depth sum with its "maintain" rule (see the
    module docstring): (groups,) float64."""
    order = torch.sort(key, stable=True)  # groups contiguous, label order kept inside each
    keys, perm = order.values, order.indices
    position = torch.arange(len(keys), device=key.device)
    first = torch.ones_like(keys, dtype=torch.bool)
    first[1:] = keys[1:] != keys[:-1]
    start = torch.cummax(torch.where(first, position, 0), 0).values
    rank = position - start  # labels of the group before this one
    event = (inside & ~has_depth)[perm] & (rank >= 1)
    before = torch.cumsum(event.long(), 0) - event.long()
    segment = before - before[start]  # events of the group before this label
    flat = segment * groups + keys
    values = torch.where(has_depth[perm], offsets[perm], 0.)
    sums = torch.zeros((max_events + 1) * groups, dtype=torch.float64, device=key.device)
    sums = sums.index_add_(0, flat, values).view(max_events + 1, groups)
    total = sums[0]
    if max_events:
        # event j of each group scales by count / (count - 1); groups without one by 1, exactly
        scale = torch.ones(max_events * groups + 1, dtype=torch.float64, device=key.device)
        slot = torch.where(event, flat, max_events * groups)  # the last slot: a dump
        counts = (rank + 1).double()
        scale = scale.index_put_((slot,), counts / (counts - 1))[:-1].view(max_events, groups)
        for j in range(max_events):
            total = torch.where(total > 0, total * scale[j], total) + sums[j + 1]
    return total
