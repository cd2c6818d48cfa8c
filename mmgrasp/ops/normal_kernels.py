"""The normals rule (:mod:`.point_normals`, :mod:`.normal_rule`) as one Triton launch for a batch
of clouds, with the bits of :func:`.point_normals.estimate_normals`.

A program takes ``BQ`` query points of one frame and scans the frame's points in ``BR``-wide
tiles, never holding more than a (BQ, S, BR) comparison:

1. **Bracket.** One scan counts, per query, the points below ``S`` thresholds ``radius² · 4⁻ˢ``.
   The ``max_nn``-th nearest then lies in [lo, hi): the two thresholds around it (fewer than
   ``max_nn`` points below lo, at least ``max_nn`` below hi; all of the ball when it holds
   fewer). While more than ``CAP`` points lie below hi, another scan splits [lo, hi) into
   ``S`` parts evenly in the bits of the float64 values, down to a single value (all equal
   distances: a tie).
2. **Collect.** A scan writes the indices of the points below lo, then of those in [lo, hi)
   (index order; in a tie the lowest indices), into the query's ``CAP`` slots of a scratch
   buffer.
3. **Order and sum.** ``max_nn`` times the nearest slot (lowest index among equals) is taken,
   as the rule orders them, and its raw moments added, then the covariance, the eigenvector
   (:mod:`.normal_rule`'s branches, operation for operation), the sign and the scale.

Squared distances are float64 ``(dx² + dy²) + dz²`` of ``neighbour − query``; every float64
operation is an IEEE-754 one (the PTX has ``div.rn.f64`` and ``sqrt.rn.f64``) and
floating-point contraction is off (``enable_fp_fusion=False``: no FMA, ptxas ``--fmad=false``),
so the result is bit for bit the numpy rule's, which the tests check under
``TRITON_INTERPRET=1``. The float64 scans run at the device's FP64 rate.

Import this module through :func:`.point_normals.kernels_for` (None without Triton).
"""
from functools import lru_cache

import torch
import triton
import triton.language as tl
from torch import Tensor

from .normal_rule import BISECTION_STEPS
from .point_kernels import Launch, launch

_BQ = 16  # query points a program
_BR = 8  # points a tile of a scan
_S = 8  # thresholds a counting scan
_CAP = 64  # neighbour slots a query (max_nn <= CAP)


@triton.jit
def _cross(ux, uy, uz, vx, vy, vz):
    return uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx


@triton.jit
def _cubic_root(half_det, low, high, STEPS: tl.constexpr):
    """The root of β³ − 3β − 2h in [low, high] by bisection (normal_rule._cubic_root)."""
    lo = half_det * 0.0 + low
    hi = half_det * 0.0 + high
    for _ in range(STEPS):
        mid = (lo + hi) * 0.5
        below = (mid * mid * mid - 3.0 * mid) - 2.0 * half_det < 0.0
        lo = tl.where(below, mid, lo)
        hi = tl.where(below, hi, mid)
    return hi


@triton.jit
def _eigenvector0(a00, a01, a02, a11, a12, a22, value):
    """normal_rule._eigenvector0: the largest cross product of two rows of A − λI, unit."""
    ax, ay, az = _cross(a00 - value, a01, a02, a01, a11 - value, a12)
    bx, by, bz = _cross(a00 - value, a01, a02, a02, a12, a22 - value)
    cx, cy, cz = _cross(a01, a11 - value, a12, a02, a12, a22 - value)
    d0 = ax * ax + ay * ay + az * az
    d1 = bx * bx + by * by + bz * bz
    d2 = cx * cx + cy * cy + cz * cz
    first = d1 > d0
    last = d2 > tl.where(first, d1, d0)
    r0, r1, r2 = tl.sqrt(d0), tl.sqrt(d1), tl.sqrt(d2)
    x = tl.where(last, cx / r2, tl.where(first, bx / r1, ax / r0))
    y = tl.where(last, cy / r2, tl.where(first, by / r1, ay / r0))
    z = tl.where(last, cz / r2, tl.where(first, bz / r1, az / r0))
    return x, y, z


@triton.jit
def _normalised(num, den):
    ratio = num / den
    inverse = (ratio * 0.0 + 1.0) / tl.sqrt(1 + ratio * ratio)
    return ratio * inverse, inverse


@triton.jit
def _eigenvector1(a00, a01, a02, a11, a12, a22, x, y, z, value):
    """normal_rule._eigenvector1: the eigenvector of ``value`` orthogonal to (x, y, z)."""
    one = x * 0.0 + 1.0
    x_larger = tl.abs(x) > tl.abs(y)
    inv_xz = one / tl.sqrt(x * x + z * z)
    inv_yz = one / tl.sqrt(y * y + z * z)
    ux = tl.where(x_larger, -z * inv_xz, 0.0)
    uy = tl.where(x_larger, 0.0, z * inv_yz)
    uz = tl.where(x_larger, x * inv_xz, -y * inv_yz)
    vx, vy, vz = _cross(x, y, z, ux, uy, uz)
    aux = a00 * ux + a01 * uy + a02 * uz
    auy = a01 * ux + a11 * uy + a12 * uz
    auz = a02 * ux + a12 * uy + a22 * uz
    avx = a00 * vx + a01 * vy + a02 * vz
    avy = a01 * vx + a11 * vy + a12 * vz
    avz = a02 * vx + a12 * vy + a22 * vz
    m00 = ux * aux + uy * auy + uz * auz - value
    m01 = ux * avx + uy * avy + uz * avz
    m11 = vx * avx + vy * avy + vz * avz - value
    abs00, abs01, abs11 = tl.abs(m00), tl.abs(m01), tl.abs(m11)
    first = abs00 >= abs11
    n01_a, n00_a = _normalised(m01, m00)
    n00_b, n01_b = _normalised(m00, m01)
    big00 = abs00 >= abs01
    n01_c, n11_c = _normalised(m01, m11)
    n11_d, n01_d = _normalised(m11, m01)
    big11 = abs11 >= abs01
    coef_u = tl.where(first, tl.where(big00, n01_a, n01_b), tl.where(big11, n11_c, n11_d))
    coef_v = tl.where(first, tl.where(big00, n00_a, n00_b), tl.where(big11, n01_c, n01_d))
    nonzero = tl.where(first, tl.where(abs00 > abs01, abs00, abs01),
                       tl.where(abs11 > abs01, abs11, abs01)) > 0
    return (tl.where(nonzero, coef_u * ux - coef_v * vx, ux),
            tl.where(nonzero, coef_u * uy - coef_v * vy, uy),
            tl.where(nonzero, coef_u * uz - coef_v * vz, uz))


@triton.jit
def _pick3(condition, ax, ay, az, bx, by, bz):
    return tl.where(condition, ax, bx), tl.where(condition, ay, by), tl.where(condition, az, bz)


@triton.jit
def _fast_eigen3x3(c00, c01, c02, c11, c12, c22, STEPS: tl.constexpr):
    """normal_rule.fast_eigen3x3, operation for operation."""
    largest = c00
    largest = tl.where(c01 > largest, c01, largest)
    largest = tl.where(c02 > largest, c02, largest)
    largest = tl.where(c11 > largest, c11, largest)
    largest = tl.where(c12 > largest, c12, largest)
    largest = tl.where(c22 > largest, c22, largest)
    zero_matrix = largest == 0
    divisor = tl.where(zero_matrix, largest * 0.0 + 1.0, largest)
    a00 = c00 / divisor
    a01 = c01 / divisor
    a02 = c02 / divisor
    a11 = c11 / divisor
    a12 = c12 / divisor
    a22 = c22 / divisor
    norm = a01 * a01 + a02 * a02 + a12 * a12
    trace = a00 + a11 + a22
    q = trace / (trace * 0.0 + 3.0)  # normal_rule._divide
    b00, b11, b22 = a00 - q, a11 - q, a22 - q
    spread = b00 * b00 + b11 * b11 + b22 * b22 + norm * 2
    p = tl.sqrt(spread / (spread * 0.0 + 6.0))
    k00 = b11 * b22 - a12 * a12
    k01 = a01 * b22 - a12 * a02
    k02 = a01 * a12 - b11 * a02
    half_det = (b00 * k00 - a01 * k01 + a02 * k02) / (p * p * p) * 0.5
    half_det = tl.where(half_det < -1.0, half_det * 0.0 - 1.0, half_det)
    half_det = tl.where(1.0 < half_det, half_det * 0.0 + 1.0, half_det)
    beta2 = _cubic_root(half_det, 1.0, 2.0, STEPS)
    beta0 = _cubic_root(half_det, -2.0, -1.0, STEPS)
    beta1 = -(beta0 + beta2)
    eval0, eval1, eval2 = q + p * beta0, q + p * beta1, q + p * beta2
    up = half_det >= 0  # normal_rule.fast_eigen3x3: one branch's operations per row
    fx, fy, fz = _eigenvector0(a00, a01, a02, a11, a12, a22, tl.where(up, eval2, eval0))
    sx, sy, sz = _eigenvector1(a00, a01, a02, a11, a12, a22, fx, fy, fz, eval1)
    ux, uy, uz = _cross(sx, sy, sz, fx, fy, fz)
    dx, dy, dz = _cross(fx, fy, fz, sx, sy, sz)
    tx, ty, tz = _pick3(up, ux, uy, uz, dx, dy, dz)
    first_smallest = tl.where(up, (eval2 < eval0) & (eval2 < eval1),
                              (eval0 < eval1) & (eval0 < eval2))
    gx, gy, gz = _pick3((eval1 < eval0) & (eval1 < eval2), sx, sy, sz, tx, ty, tz)
    gx, gy, gz = _pick3(first_smallest, fx, fy, fz, gx, gy, gz)
    d00, d11, d22 = a00 * largest, a11 * largest, a22 * largest
    x_axis = (d00 < d11) & (d00 < d22)
    y_axis = (~x_axis) & (d11 < d00) & (d11 < d22)
    one, nil = q * 0.0 + 1.0, q * 0.0
    gx, gy, gz = _pick3(norm > 0, gx, gy, gz, tl.where(x_axis, one, nil),
                        tl.where(y_axis, one, nil), tl.where(x_axis | y_axis, nil, one))
    return _pick3(zero_matrix, nil, nil, nil, gx, gy, gz)


@triton.jit
def _squared(xyz_ptr, index, mask, qx, qy, qz):
    """float64 (dx² + dy²) + dz² of the points ``index`` minus the queries, and the points."""
    px = tl.load(xyz_ptr + index * 3, mask=mask, other=0.0).to(tl.float64)
    py = tl.load(xyz_ptr + index * 3 + 1, mask=mask, other=0.0).to(tl.float64)
    pz = tl.load(xyz_ptr + index * 3 + 2, mask=mask, other=0.0).to(tl.float64)
    dx, dy, dz = px - qx, py - qy, pz - qz
    return (dx * dx + dy * dy) + dz * dz


@triton.jit
def _count_below(xyz_ptr, n, qx, qy, qz, thresholds, BR: tl.constexpr):
    """(BQ, S) points of the frame whose squared distance is below each threshold (BQ, S)."""
    counts = tl.zeros(thresholds.shape, dtype=tl.int32)
    for start in range(0, n, BR):
        cols = start + tl.arange(0, BR)
        ok = cols < n
        d2 = _squared(xyz_ptr, cols[None, :], ok[None, :], qx[:, None], qy[:, None], qz[:, None])
        d2 = tl.where(ok[None, :], d2, float('inf'))
        counts += tl.sum((d2[:, None, :] < thresholds[:, :, None]).to(tl.int32), axis=2)
    return counts


@triton.jit
def _normals_kernel(xyz_ptr, params_ptr, slots_ptr, out_ptr, n, max_nn, camera,
                    BQ: tl.constexpr, BR: tl.constexpr, S: tl.constexpr, CAP: tl.constexpr,
                    STEPS: tl.constexpr):
    pid = tl.program_id(0)
    blocks = tl.cdiv(n, BQ)
    b = pid // blocks
    rows = (pid % blocks) * BQ + tl.arange(0, BQ)
    row_ok = rows < n
    xyz_ptr += b.to(tl.int64) * n * 3
    radius2 = tl.load(params_ptr)
    scale = tl.load(params_ptr + 1)
    qx = tl.load(xyz_ptr + rows * 3, mask=row_ok, other=0.0).to(tl.float64)
    qy = tl.load(xyz_ptr + rows * 3 + 1, mask=row_ok, other=0.0).to(tl.float64)
    qz = tl.load(xyz_ptr + rows * 3 + 2, mask=row_ok, other=0.0).to(tl.float64)
    s = tl.arange(0, S)
    inf = float('inf')
    # 1. bracket: radius² · 4⁻ˢ (exact powers of two), then splits of [lo, hi) in bits
    power = ((1023 - 2 * s).to(tl.int64) << 52).to(tl.float64, bitcast=True)
    thresholds = radius2 * power[None, :] + qx[:, None] * 0.0
    counts = _count_below(xyz_ptr, n, qx, qy, qz, thresholds, BR)
    enough = counts >= max_nn
    top = tl.max(tl.where(enough, s[None, :], -1), axis=1)  # the smallest enough threshold
    in_ball = tl.sum(tl.where(s[None, :] == 0, counts, 0), axis=1)
    hi = tl.sum(tl.where(s[None, :] == top[:, None], thresholds, 0.0), axis=1)
    c_hi = tl.sum(tl.where(s[None, :] == top[:, None], counts, 0), axis=1)
    lo = tl.sum(tl.where(s[None, :] == top[:, None] + 1, thresholds, 0.0), axis=1)
    c_lo = tl.sum(tl.where(s[None, :] == top[:, None] + 1, counts, 0), axis=1)
    hi = tl.where(top < 0, radius2, hi)  # fewer than max_nn in the ball: all of it
    c_hi = tl.where(top < 0, in_ball, c_hi)
    todo = row_ok & (c_hi > CAP)
    while tl.max(todo.to(tl.int32), axis=0) > 0:
        low_bits = lo.to(tl.int64, bitcast=True)
        high_bits = hi.to(tl.int64, bitcast=True)
        step = tl.maximum((high_bits - low_bits) // S, 1)
        bits = tl.minimum(low_bits[:, None] + step[:, None] * (s[None, :] + 1).to(tl.int64),
                          high_bits[:, None])
        bits = tl.where(s[None, :] == S - 1, high_bits[:, None], bits)  # the last one is hi
        split = bits.to(tl.float64, bitcast=True)
        counts = _count_below(xyz_ptr, n, qx, qy, qz, split, BR)
        first = tl.min(tl.where(counts >= max_nn, s[None, :], S), axis=1)
        new_hi = tl.sum(tl.where(s[None, :] == first[:, None], split, 0.0), axis=1)
        new_c_hi = tl.sum(tl.where(s[None, :] == first[:, None], counts, 0), axis=1)
        new_lo = tl.sum(tl.where(s[None, :] == first[:, None] - 1, split, 0.0), axis=1)
        new_c_lo = tl.sum(tl.where(s[None, :] == first[:, None] - 1, counts, 0), axis=1)
        lo = tl.where(todo & (first > 0), new_lo, lo)
        c_lo = tl.where(todo & (first > 0), new_c_lo, c_lo)
        hi = tl.where(todo, new_hi, hi)
        c_hi = tl.where(todo, new_c_hi, c_hi)
        gap = hi.to(tl.int64, bitcast=True) - lo.to(tl.int64, bitcast=True)
        todo = todo & (c_hi > CAP) & (gap > 1)
    # 2. collect: below lo in the first slots, then [lo, hi) in index order
    slots = slots_ptr + (b.to(tl.int64) * n + rows)[:, None] * CAP
    n_low = tl.zeros([BQ], dtype=tl.int32)
    n_mid = tl.zeros([BQ], dtype=tl.int32)
    for start in range(0, n, BR):
        cols = start + tl.arange(0, BR)
        col_ok = cols < n
        d2 = _squared(xyz_ptr, cols[None, :], col_ok[None, :], qx[:, None], qy[:, None],
                      qz[:, None])
        ok = row_ok[:, None] & col_ok[None, :]
        low = ok & (d2 < lo[:, None])
        mid = ok & (d2 >= lo[:, None]) & (d2 < hi[:, None])
        slot = tl.where(low, n_low[:, None] + tl.cumsum(low.to(tl.int32), axis=1) - 1,
                        c_lo[:, None] + n_mid[:, None] + tl.cumsum(mid.to(tl.int32), axis=1) - 1)
        tl.store(slots + slot, cols[None, :] + slot * 0, mask=(low | mid) & (slot < CAP))
        n_low += tl.sum(low.to(tl.int32), axis=1)
        n_mid += tl.sum(mid.to(tl.int32), axis=1)
    tl.debug_barrier()  # the slots written above are read below, by other threads
    # 3. nearest first (lowest index among equals), summing the raw moments
    filled = tl.minimum(c_hi, CAP)
    count = tl.where(row_ok, tl.minimum(filled, max_nn), 0)
    k = tl.arange(0, CAP)
    have = row_ok[:, None] & (k[None, :] < filled[:, None])
    index = tl.load(slots + k[None, :], mask=have, other=0)
    d2 = _squared(xyz_ptr, index, have, qx[:, None], qy[:, None], qz[:, None])
    d2 = tl.where(have, d2, inf)
    m0 = qx * 0.0
    m1, m2, m3, m4, m5, m6, m7, m8 = m0, m0, m0, m0, m0, m0, m0, m0
    for j in range(0, max_nn):
        nearest = tl.min(d2, axis=1)
        pick = tl.min(tl.where(d2 == nearest[:, None], index, n), axis=1)
        taken = j < count
        x = tl.load(xyz_ptr + pick * 3, mask=taken, other=0.0).to(tl.float64)
        y = tl.load(xyz_ptr + pick * 3 + 1, mask=taken, other=0.0).to(tl.float64)
        z = tl.load(xyz_ptr + pick * 3 + 2, mask=taken, other=0.0).to(tl.float64)
        m0 = tl.where(taken, m0 + x, m0)
        m1 = tl.where(taken, m1 + y, m1)
        m2 = tl.where(taken, m2 + z, m2)
        m3 = tl.where(taken, m3 + x * x, m3)
        m4 = tl.where(taken, m4 + x * y, m4)
        m5 = tl.where(taken, m5 + x * z, m5)
        m6 = tl.where(taken, m6 + y * y, m6)
        m7 = tl.where(taken, m7 + y * z, m7)
        m8 = tl.where(taken, m8 + z * z, m8)
        d2 = tl.where(index == pick[:, None], inf, d2)
    total = count.to(tl.float64)
    total = tl.where(total > 0, total, total * 0.0 + 1.0)
    m0, m1, m2 = m0 / total, m1 / total, m2 / total
    m3, m4, m5 = m3 / total, m4 / total, m5 / total
    m6, m7, m8 = m6 / total, m7 / total, m8 / total
    few = count < 3
    one, nil = qx * 0.0 + 1.0, qx * 0.0
    c00 = tl.where(few, one, m3 - m0 * m0)
    c01 = tl.where(few, nil, m4 - m0 * m1)
    c02 = tl.where(few, nil, m5 - m0 * m2)
    c11 = tl.where(few, one, m6 - m1 * m1)
    c12 = tl.where(few, nil, m7 - m1 * m2)
    c22 = tl.where(few, one, m8 - m2 * m2)
    nx, ny, nz = _fast_eigen3x3(c00, c01, c02, c11, c12, c22, STEPS)
    length = tl.sqrt(nx * nx + ny * ny + nz * nz)
    nx, ny, nz = _pick3(length == 0, nil, nil, one, nx, ny, nz)
    away = (camera != 0) & (nx * qx + ny * qy + nz * qz > 0)
    nx, ny, nz = _pick3(away, -nx, -ny, -nz, nx, ny, nz)
    out_ptr += (b.to(tl.int64) * n + rows) * 3
    tl.store(out_ptr, (nx * scale).to(tl.float32), mask=row_ok)
    tl.store(out_ptr + 1, (ny * scale).to(tl.float32), mask=row_ok)
    tl.store(out_ptr + 2, (nz * scale).to(tl.float32), mask=row_ok)


_CONSTEXPRS = dict(BQ=_BQ, BR=_BR, S=_S, CAP=_CAP, STEPS=BISECTION_STEPS)
#: Every launch of this module (see point_kernels.LAUNCHES; compiled by the compile test).
LAUNCHES = (
    Launch(_normals_kernel,
           dict(xyz_ptr='*fp32', params_ptr='*fp64', slots_ptr='*i32', out_ptr='*fp32', n='i32',
                max_nn='i32', camera='i32'),
           _CONSTEXPRS, dict(enable_fp_fusion=False)),
)


@lru_cache(maxsize=64)
def _params(radius: float, scale: float, device: torch.device) -> Tensor:
    """radius² and scale as float64 on the device (Triton passes Python floats as float32),
    made once per (radius, scale, device)."""
    return torch.tensor([radius * radius, scale], dtype=torch.float64, device=device)


def estimate_normals(points: Tensor, radius: float, max_nn: int, orientation: str,
                     scale: float) -> Tensor:
    """As :func:`.point_normals.batch_normals` (settings already checked), in one launch."""
    batch, n, _ = points.shape
    if max_nn > _CAP:
        raise ValueError(f'batch_normals on CUDA takes max_nn <= {_CAP}, got {max_nn}')
    out = torch.empty_like(points)
    if batch * n == 0:
        return out
    slots = torch.empty(batch * n * _CAP, dtype=torch.int32, device=points.device)
    launch(_normals_kernel, (batch * triton.cdiv(n, _BQ), ), points.contiguous(),
           _params(radius, scale, points.device), slots, out, n, max_nn,
           int(orientation == 'camera'), table=LAUNCHES, **_CONSTEXPRS)
    return out
