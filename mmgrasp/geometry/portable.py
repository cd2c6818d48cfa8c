"""Float64 arithmetic that gives the same bits on every x86-64 CPU, whatever BLAS kernel and
SIMD code path the machine picks: the synthetic datasets are computed with it, so that their
files are byte-identical everywhere (``docs/user_guides/dataset_prepare.md``).

What it avoids: numpy's ``@``, ``dot`` and ``linalg`` call the BLAS / LAPACK, whose kernel
(chosen for the CPU at run time) sums in its own order and fuses multiply-adds; ``einsum``'s
kernels fuse them or not depending on how numpy was compiled; numpy's float64 ``sin``, ``cos``,
``arccos``, ... call SVML on AVX-512 CPUs and glibc's libm elsewhere, whose FMA and non-FMA
variants (chosen for the CPU at run time; Python's ``math`` calls them too) round differently.
Everything here is numpy's element-wise ``+ - * /``, ``sqrt`` and ``rint`` in a fixed order:
each a correctly rounded IEEE operation whatever the SIMD width, one per ufunc call, so nothing
can fuse two of them. Results differ from numpy's by rounding only.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ['matmul', 'matvec', 'dot', 'norm', 'transform', 'rigid_inverse', 'sin', 'cos']

#: pi / 2 to 64 digits, the only constant the sine and cosine start from.
_HALF_PI = Fraction('1.570796326794896619231321691639751442098584699687552910487472296')


def _leading_bits(x: Fraction, bits: int) -> float:
    """``x`` rounded to ``bits`` significant bits (exact as a float for bits <= 53)."""
    step = Fraction(2) ** (math.frexp(float(x))[1] - bits)
    return float(round(x / step) * step)


# Cody and Waite's reduction: k * pi/2 as three parts whose first two have 33 significant bits,
# so k * part is exact for |k| < 2**20 and x - k * _PIO2_HI cancels exactly.
_PIO2_HI = _leading_bits(_HALF_PI, 33)
_PIO2_MID = _leading_bits(_HALF_PI - Fraction(_PIO2_HI), 33)
_PIO2_LO = float(_HALF_PI - Fraction(_PIO2_HI) - Fraction(_PIO2_MID))
_TWO_OVER_PI = float(1 / _HALF_PI)
MAX_ANGLE = 2.0 ** 19 * math.pi  # |k| < 2**20 after reduction
# Taylor coefficients of sin(r) / r - 1 and cos(r) - 1 in r^2 (|r| <= pi/4: the first term
# left out is below 1e-19), lowest first.
_SIN_COEFFS = [float(Fraction((-1) ** n, math.factorial(2 * n + 1))) for n in range(1, 9)]
_COS_COEFFS = [float(Fraction((-1) ** n, math.factorial(2 * n))) for n in range(1, 9)]


def _as_float64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def matmul(a, b) -> np.ndarray:
    """``a @ b`` for arrays of >= 2 dimensions (stacks broadcast), summed over k = 0, 1, ..."""
    a, b = _as_float64(a), _as_float64(b)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f'matmul needs (..., n, k) and (..., k, m), got {a.shape} and {b.shape}')
    out = a[..., :, :1] * b[..., :1, :]
    for k in range(1, a.shape[-1]):
        out = out + a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return out


def matvec(m, v) -> np.ndarray:
    """``m @ v`` of matrices (..., n, k) and vectors (..., k) (stacks broadcast) -> (..., n)."""
    m, v = _as_float64(m), _as_float64(v)
    if m.ndim < 2 or v.ndim < 1 or m.shape[-1] != v.shape[-1]:
        raise ValueError(f'matvec needs (..., n, k) and (..., k), got {m.shape} and {v.shape}')
    out = m[..., 0] * v[..., None, 0]
    for k in range(1, m.shape[-1]):
        out = out + m[..., k] * v[..., None, k]
    return out


def dot(a, b) -> np.ndarray:
    """Dot products over the last axis (shapes broadcast), summed in index order."""
    a, b = _as_float64(a), _as_float64(b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f'dot needs equal last axes, got {a.shape} and {b.shape}')
    out = a[..., 0] * b[..., 0]
    for k in range(1, a.shape[-1]):
        out = out + a[..., k] * b[..., k]
    return out


def norm(v) -> np.ndarray:
    """Euclidean norms over the last axis."""
    return np.sqrt(dot(v, v))


def transform(points, pose) -> np.ndarray:
    """Points (..., 3) moved by the 4x4 ``pose``: ``points @ R.T + t``."""
    pose = _as_float64(pose)
    return matvec(pose[:3, :3], points) + pose[:3, 3]


def rigid_inverse(pose) -> np.ndarray:
    """Inverse (R^T, -R^T t) of a 4x4 rigid transform, which ``np.linalg.inv`` equals up to
    rounding."""
    pose = _as_float64(pose)
    out = np.eye(4)
    out[:3, :3] = pose[:3, :3].T
    out[:3, 3] = -matvec(out[:3, :3], pose[:3, 3])
    return out


def _reduce(x) -> tuple[np.ndarray, np.ndarray]:
    """(r, q): x = r + (4n + q) * pi/2 with |r| <= pi/4 (about), q in 0..3."""
    x = _as_float64(x)
    if not np.all(np.abs(x) <= MAX_ANGLE):
        raise ValueError(f'portable sin/cos take finite angles up to {MAX_ANGLE:.0f} rad (where '
                         f'the reduction is exact), got {x[~(np.abs(x) <= MAX_ANGLE)][:3]}')
    k = np.rint(x * _TWO_OVER_PI)
    r = ((x - k * _PIO2_HI) - k * _PIO2_MID) - k * _PIO2_LO
    return r, k.astype(np.int64) % 4


def _poly(z: np.ndarray, coeffs: list) -> np.ndarray:
    """coeffs[0] + coeffs[1] z + ... by Horner's rule, highest first."""
    out = np.full_like(z, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = out * z + c
    return out


def _sin_cos_reduced(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = r * r
    return r + r * (z * _poly(z, _SIN_COEFFS)), 1.0 + z * _poly(z, _COS_COEFFS)


def sin(x) -> np.ndarray:
    """Sine (|x| <= ``MAX_ANGLE``), within about one unit in the last place."""
    r, q = _reduce(x)
    s, c = _sin_cos_reduced(r)
    return np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)[()]


def cos(x) -> np.ndarray:
    """Cosine (|x| <= ``MAX_ANGLE``), within about one unit in the last place."""
    r, q = _reduce(x)
    s, c = _sin_cos_reduced(r)
    return np.select([q == 0, q == 1, q == 2], [c, -s, -c], s)[()]
