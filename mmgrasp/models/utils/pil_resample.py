"""Pillow's bicubic ``Image.resize`` in torch, bit for bit, on any device.

HGGD's dataset resizes every frame with PIL (``Image.resize((640, 360))``, whose default filter
is BICUBIC): depth as a mode 'F' image (float32 millimetres), colour as mode 'RGB'. This module
reproduces Pillow's ``libImaging/Resample.c`` so the data preprocessor can resize batches of
integer images on the device and give the same numbers:

- Coefficients (``precompute_coeffs``): for output pixel ``i`` the centre is ``(i + 0.5) *
  scale`` (``scale = in / out``); the filter is stretched by ``max(scale, 1)`` (the support of
  the a = -0.5 bicubic kernel, 2, becomes 4 input pixels when halving); the taps run from
  ``int(centre - support + 0.5)`` (clipped at 0) to ``int(centre + support + 0.5)`` (clipped at
  the size), each weighted ``bicubic((x - centre + 0.5) / max(scale, 1))`` and normalised by
  their sum. All in double precision, in Pillow's order (Python floats are doubles).
- Two passes, horizontal first, the intermediate image stored in the image's own type.
- Mode 'F': each output is a double sum, accumulated tap by tap in tap order, stored as
  float32. Here: float64 products and sums, one tap at a time, then float32 — the same
  operations in the same order (taps of weight zero add zeros).
- Mode 'RGB' (8 bits a channel): the coefficients become integers scaled by 2^22
  (``normalize_coeffs_8bpc``: rounded half away from zero), the sum starts at 2^21 (rounding),
  and the result is ``clip8(sum >> 22)``. Here: the same integers, exactly (int32).
"""
import functools
import math
from typing import Tuple

import numpy as np
import torch
from torch import Tensor

#: Fractional bits of Pillow's 8-bit coefficients (``PRECISION_BITS = 32 - 8 - 2``).
PRECISION_BITS = 22
BICUBIC_SUPPORT = 2.0


def bicubic(x: float) -> float:
    """Pillow's ``bicubic_filter`` (Keys' cubic convolution, a = -0.5), in its operation order."""
    a = -0.5
    x = -x if x < 0.0 else x
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


@functools.lru_cache(maxsize=None)
def bicubic_coefficients(in_size: int, out_size: int) -> Tuple[np.ndarray, np.ndarray]:
    """Pillow's ``precompute_coeffs`` of a bicubic resize of a whole axis: ``starts`` ((out,)
    int64, the first input pixel of each output pixel) and ``weights`` ((out, taps) float64,
    zero past each output's last tap). Cached per size; do not modify."""
    if in_size < 1 or out_size < 1:
        raise ValueError(f'resize sizes must be positive, got {in_size} -> {out_size}')
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = BICUBIC_SUPPORT * filterscale
    inv_filterscale = 1.0 / filterscale
    starts, rows = np.zeros(out_size, np.int64), []
    for i in range(out_size):
        centre = (i + 0.5) * scale
        xmin = max(int(centre - support + 0.5), 0)
        xmax = min(int(centre + support + 0.5), in_size) - xmin
        row = [bicubic((x + xmin - centre + 0.5) * inv_filterscale) for x in range(xmax)]
        total = 0.0
        for w in row:
            total += w
        starts[i] = xmin
        rows.append([w / total for w in row] if total != 0.0 else row)
    weights = np.zeros((out_size, max(len(r) for r in rows)), np.float64)
    for i, row in enumerate(rows):
        weights[i, :len(row)] = row
    return starts, weights


@functools.lru_cache(maxsize=None)
def resample_plan(in_size: int, out_size: int) -> Tuple[np.ndarray, int, np.ndarray]:
    """The windows one pass reads: ``(starts, step, weights)``, window ``i`` covering input
    pixels ``starts[i] .. starts[i] + taps - 1`` with ``weights[i]``.

    For an integer size ratio (1280 -> 640) the windows are evenly spaced, ``starts[i] = first
    + step * i`` (``first`` may be negative: the axis is padded with zeros, whose weights are
    zero), Pillow's weights moved to their pixels. Otherwise ``step = 0`` and Pillow's own
    windows (:func:`bicubic_coefficients`), gathered."""
    starts, weights = bicubic_coefficients(in_size, out_size)
    if in_size % out_size:
        return starts, 0, weights
    step = in_size // out_size
    offsets = starts - step * np.arange(out_size)
    first = int(offsets.min())
    taps = int((offsets + weights.shape[1]).max()) - first
    moved = np.zeros((out_size, taps), np.float64)
    for i, offset in enumerate(offsets):
        moved[i, offset - first:offset - first + weights.shape[1]] = weights[i]
    return first + step * np.arange(out_size), step, moved


def fixed_point(weights: np.ndarray) -> np.ndarray:
    """Pillow's ``normalize_coeffs_8bpc``: weights × 2^22, rounded half away from zero, int32."""
    scaled = weights * (1 << PRECISION_BITS)
    return np.where(weights < 0, (-0.5 + scaled).astype(np.int64),
                    (0.5 + scaled).astype(np.int64)).astype(np.int32)


def _windows(x: Tensor, plan: Tuple[np.ndarray, int, np.ndarray]) -> Tensor:
    """(..., out, taps) windows of the last axis of ``x`` (:func:`resample_plan`), zeros
    outside the axis: a strided view of the padded axis when evenly spaced, else gathered."""
    starts, step, weights = plan
    taps, size = weights.shape[1], x.shape[-1]
    left, right = max(-int(starts[0]), 0), max(int(starts[-1]) + taps - size, 0)
    if left or right:
        x = torch.nn.functional.pad(x, (left, right))
    if step:
        return x[..., int(starts[0]) + left:].unfold(-1, taps, step)[..., :len(starts), :]
    index = torch.from_numpy((starts + left)[:, None] + np.arange(taps)).reshape(-1)
    return x.index_select(-1, index.to(x.device)).unflatten(-1, (len(starts), taps))


def _resample_float(x: Tensor, size: int) -> Tensor:
    """One pass of mode 'F' along the last axis: float32 in and out, float64 sums in tap order."""
    plan = resample_plan(x.shape[-1], size)
    windows, k = _windows(x.double(), plan), torch.from_numpy(plan[2]).to(x.device)
    total = windows[..., 0] * k[:, 0]  # tap by tap: a product of all taps at once costs 3x
    for t in range(1, k.shape[1]):     # the time on a CPU and 8x the memory
        total = total + windows[..., t] * k[:, t]  # not addcmul: no fused multiply-add
    return total.float()


def _resample_uint8(x: Tensor, size: int) -> Tensor:
    """One pass of Pillow's 8-bit path along the last axis: uint8 in and out, int32 sums."""
    plan = resample_plan(x.shape[-1], size)
    windows = _windows(x.to(torch.int32), plan)
    k = torch.from_numpy(fixed_point(plan[2])).to(x.device)
    total = torch.full(windows.shape[:-1], 1 << (PRECISION_BITS - 1), dtype=torch.int32,
                       device=x.device)
    for t in range(k.shape[1]):
        total.addcmul_(windows[..., t], k[:, t])  # integers: exact in any order
    return (total >> PRECISION_BITS).clamp_(0, 255).to(torch.uint8)


def resize_float(image: Tensor, size: Tuple[int, int]) -> Tensor:
    """``Image.fromarray(image).resize(size)`` of mode 'F' images: ``image`` (..., H, W)
    float32, ``size`` (width, height) as PIL takes it; (..., height, width) float32."""
    if image.dtype != torch.float32:
        raise TypeError(f'resize_float takes float32 images, got {image.dtype}')
    wide = _resample_float(image, size[0])
    return _resample_float(wide.transpose(-1, -2), size[1]).transpose(-1, -2)


def resize_uint8(image: Tensor, size: Tuple[int, int]) -> Tensor:
    """``Image.fromarray(image).resize(size)`` of 8-bit images, channel by channel: ``image``
    (..., H, W) uint8 (an 'RGB' image as (..., 3, H, W)), ``size`` (width, height); uint8."""
    if image.dtype != torch.uint8:
        raise TypeError(f'resize_uint8 takes uint8 images, got {image.dtype}')
    wide = _resample_uint8(image, size[0])
    return _resample_uint8(wide.transpose(-1, -2), size[1]).transpose(-1, -2)
