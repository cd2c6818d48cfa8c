"""One-launch Triton kernels of the point ops (FPS, ball/cylinder query, three and k nearest
neighbours).

Each kernel gives exactly the indices of its pure-torch reference in :mod:`.point_ops`: the same
float32 arithmetic in the same order (``(dx² + dy²) + dz²``; ``Rᵀ(q − c)`` summed over rows
0, 1, 2), comparisons against float32 thresholds, and ties to the lowest index. Floating-point
contraction is switched off at compile time (``enable_fp_fusion=False``) so that no multiply-add
is fused into one rounding on the GPU. ``TRITON_INTERPRET=1`` set before this module is imported
runs the kernels on CPU tensors, which is how the tests compare them with the references.

Import this module only through :func:`.point_ops.triton_kernels`, which returns None when
Triton is not installed.
"""
from functools import lru_cache
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor
from triton.runtime.jit import mangle_type

_FLAGS = dict(enable_fp_fusion=False)
_BLOCK = 1024  # points per chunk of a loop over the cloud
_PAD = 64  # output slots padded per step by the queries
_FPS_WARPS = 16  # one program per frame: 512 threads, as pointnet2's kernel for large clouds
_THREE_NN_BLOCK = 128  # query points per program
_KNN_BLOCK = 128  # query points per program
#: Slots of the k-nearest-neighbour kernel (powers of two, for its final sort): it serves every
#: k from 4 to the largest (point_ops.KNN_KERNEL_MAX_K, which calls it; not imported from there:
#: point_ops imports this module); k <= 3 is three_nn's, a larger k the torch reference's.
KNN_SLOTS = (4, 8, 16)


@triton.jit
def _fps_kernel(xyz_ptr, mask_ptr, nearest_ptr, out_ptr, n, num,
                HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):
    """One program per frame. A pick is one pass over the points in BLOCK-wide chunks, in which
    each lane updates the min-distances and keeps its own farthest point (strict ``>``: its
    earliest chunk keeps a tie), then one block max of the lanes' int64 keys (distance bits,
    then ``n - index``): the bits of non-negative float32 values order as the values, so the key
    is the farthest point and, of equal ones, the lowest index, as ``torch.argmax``. Ineligible
    points (-1) and padding (-3) have negative keys and never win, as an eligible point's
    min-distance is >= 0 (+0 at worst: a sum of squares is never -0)."""
    b = tl.program_id(0)
    xyz_ptr += b * n * 3
    nearest_ptr += b * n
    out_ptr += b * num
    offs = tl.arange(0, BLOCK)
    count = 0
    first = n
    for start in range(0, n, BLOCK):  # ineligible points stay at -1, the others start at 1e10
        idx = start + offs
        inside = idx < n
        eligible = inside
        if HAS_MASK:
            eligible = eligible & (tl.load(mask_ptr + b * n + idx, mask=inside, other=0) != 0)
        tl.store(nearest_ptr + idx, tl.where(eligible, 1e10, -1.0), mask=inside)
        count += tl.sum(eligible.to(tl.int32), axis=0)
        first = tl.minimum(first, tl.min(tl.where(eligible, idx, n), axis=0))
    first = tl.where(count > 0, first, 0)
    picks = tl.maximum(tl.minimum(count, num), 1)
    tl.store(out_ptr, first.to(tl.int64))
    last = first
    for pick in range(1, picks):
        cx = tl.load(xyz_ptr + last * 3)
        cy = tl.load(xyz_ptr + last * 3 + 1)
        cz = tl.load(xyz_ptr + last * 3 + 2)
        lane_best = tl.full([BLOCK], -3.0, tl.float32)  # below every point's -1 or distance
        lane_idx = tl.zeros([BLOCK], dtype=tl.int32)
        for start in range(0, n, BLOCK):
            idx = start + offs
            inside = idx < n
            dx = tl.load(xyz_ptr + idx * 3, mask=inside, other=0.0) - cx
            dy = tl.load(xyz_ptr + idx * 3 + 1, mask=inside, other=0.0) - cy
            dz = tl.load(xyz_ptr + idx * 3 + 2, mask=inside, other=0.0) - cz
            dist = dx * dx + dy * dy
            dist = dist + dz * dz
            nearest = tl.minimum(tl.load(nearest_ptr + idx, mask=inside, other=-3.0), dist)
            tl.store(nearest_ptr + idx, nearest, mask=inside)
            better = inside & (nearest > lane_best)
            lane_idx = tl.where(better, idx, lane_idx)
            lane_best = tl.where(better, nearest, lane_best)
        bits = lane_best.to(tl.int32, bitcast=True).to(tl.int64)
        key = (bits << 32) | (n - lane_idx).to(tl.int64)
        best_idx = n - (tl.max(key, axis=0) & 0xFFFFFFFF).to(tl.int32)
        tl.store(out_ptr + pick, best_idx.to(tl.int64))
        last = best_idx
    tl.debug_barrier()  # the picks above are read back below, by other threads
    for start in range(picks, num, BLOCK):  # fewer eligible points than samples: repeat cyclically
        slot = start + offs
        keep = slot < num
        tl.store(out_ptr + slot, tl.load(out_ptr + slot % picks, mask=keep, other=0), mask=keep)


@triton.jit
def _pad_first(out_ptr, count, first, n, nsample, PAD: tl.constexpr):
    """Slots count..nsample-1 get the first hit (0 when there is none), PAD slots at a time."""
    pad = tl.where(first < n, first, 0).to(tl.int64)
    for start in range(0, nsample, PAD):
        k = start + tl.arange(0, PAD)
        tl.store(out_ptr + k, tl.zeros([PAD], dtype=tl.int64) + pad,
                 mask=(k >= count) & (k < nsample))


@triton.jit
def _ball_query_kernel(xyz_ptr, centre_ptr, out_ptr, n, s, radius2, nsample,
                       BLOCK: tl.constexpr, PAD: tl.constexpr):
    pid = tl.program_id(0)  # one centre: b * s + i
    b = pid // s
    xyz_ptr += b * n * 3
    out_ptr += pid.to(tl.int64) * nsample
    cx = tl.load(centre_ptr + pid * 3)
    cy = tl.load(centre_ptr + pid * 3 + 1)
    cz = tl.load(centre_ptr + pid * 3 + 2)
    offs = tl.arange(0, BLOCK)
    count = 0
    first = n
    start = 0
    while (start < n) & (count < nsample):
        idx = start + offs
        valid = idx < n
        dx = tl.load(xyz_ptr + idx * 3, mask=valid, other=0.0) - cx
        dy = tl.load(xyz_ptr + idx * 3 + 1, mask=valid, other=0.0) - cy
        dz = tl.load(xyz_ptr + idx * 3 + 2, mask=valid, other=0.0) - cz
        dist = dx * dx + dy * dy
        dist = dist + dz * dz
        hit = valid & (dist < radius2)
        slot = count + tl.cumsum(hit.to(tl.int32), axis=0) - 1
        tl.store(out_ptr + slot, idx.to(tl.int64), mask=hit & (slot < nsample))
        count += tl.sum(hit.to(tl.int32), axis=0)
        first = tl.minimum(first, tl.min(tl.where(hit, idx, n), axis=0))
        start += BLOCK
    _pad_first(out_ptr, count, first, n, nsample, PAD)


@triton.jit
def _cylinder_query_kernel(xyz_ptr, centre_ptr, rot_ptr, radius2_ptr, hmax_ptr, out_ptr,
                           n, s, batch, num_hmax, hmin, nsample,
                           BLOCK: tl.constexpr, PAD: tl.constexpr):
    pid = tl.program_id(0)  # one centre: b * s + i
    combo = tl.program_id(1)  # one (radius, hmax): r * num_hmax + d
    b = pid // s
    radius2 = tl.load(radius2_ptr + combo // num_hmax)
    hmax = tl.load(hmax_ptr + combo % num_hmax)
    xyz_ptr += b * n * 3
    rot_ptr += pid * 9
    out_ptr += (combo.to(tl.int64) * batch * s + pid) * nsample
    cx = tl.load(centre_ptr + pid * 3)
    cy = tl.load(centre_ptr + pid * 3 + 1)
    cz = tl.load(centre_ptr + pid * 3 + 2)
    r00 = tl.load(rot_ptr)
    r01 = tl.load(rot_ptr + 1)
    r02 = tl.load(rot_ptr + 2)
    r10 = tl.load(rot_ptr + 3)
    r11 = tl.load(rot_ptr + 4)
    r12 = tl.load(rot_ptr + 5)
    r20 = tl.load(rot_ptr + 6)
    r21 = tl.load(rot_ptr + 7)
    r22 = tl.load(rot_ptr + 8)
    offs = tl.arange(0, BLOCK)
    count = 0
    first = n
    start = 0
    while (start < n) & (count < nsample):
        idx = start + offs
        valid = idx < n
        dx = tl.load(xyz_ptr + idx * 3, mask=valid, other=0.0) - cx
        dy = tl.load(xyz_ptr + idx * 3 + 1, mask=valid, other=0.0) - cy
        dz = tl.load(xyz_ptr + idx * 3 + 2, mask=valid, other=0.0) - cz
        x0 = dx * r00 + dy * r10
        x0 = x0 + dz * r20
        x1 = dx * r01 + dy * r11
        x1 = x1 + dz * r21
        x2 = dx * r02 + dy * r12
        x2 = x2 + dz * r22
        radial = x1 * x1 + x2 * x2
        hit = valid & (x0 > hmin) & (x0 < hmax) & (radial < radius2)
        slot = count + tl.cumsum(hit.to(tl.int32), axis=0) - 1
        tl.store(out_ptr + slot, idx.to(tl.int64), mask=hit & (slot < nsample))
        count += tl.sum(hit.to(tl.int32), axis=0)
        first = tl.minimum(first, tl.min(tl.where(hit, idx, n), axis=0))
        start += BLOCK
    _pad_first(out_ptr, count, first, n, nsample, PAD)


@triton.jit
def _query_block(ref_ptr, query_ptr, m, q, BLOCK: tl.constexpr):
    """The nearest-neighbour kernels' program: its frame, its BLOCK query rows (and which are
    real), the frame's reference points and the rows' coordinates."""
    b = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = rows < q
    query_ptr += b * q * 3
    qx = tl.load(query_ptr + rows * 3, mask=valid, other=0.0)
    qy = tl.load(query_ptr + rows * 3 + 1, mask=valid, other=0.0)
    qz = tl.load(query_ptr + rows * 3 + 2, mask=valid, other=0.0)
    return b, rows, valid, ref_ptr + b * m * 3, qx, qy, qz


@triton.jit
def _three_nn_kernel(ref_ptr, query_ptr, dist2_ptr, idx_ptr, m, q, BLOCK: tl.constexpr):
    b, rows, valid, ref_ptr, qx, qy, qz = _query_block(ref_ptr, query_ptr, m, q, BLOCK)
    inf = float('inf')
    d1 = tl.full([BLOCK], inf, tl.float32)
    d2 = tl.full([BLOCK], inf, tl.float32)
    d3 = tl.full([BLOCK], inf, tl.float32)
    i1 = tl.zeros([BLOCK], dtype=tl.int32)
    i2 = tl.zeros([BLOCK], dtype=tl.int32)
    i3 = tl.zeros([BLOCK], dtype=tl.int32)
    for j in range(0, m):  # insertion with strict <: equal distances keep the lower index first
        dx = qx - tl.load(ref_ptr + j * 3)
        dy = qy - tl.load(ref_ptr + j * 3 + 1)
        dz = qz - tl.load(ref_ptr + j * 3 + 2)
        d = dx * dx + dy * dy
        d = d + dz * dz
        c1 = d < d1
        c2 = d < d2
        c3 = d < d3
        d3 = tl.where(c2, d2, tl.where(c3, d, d3))
        i3 = tl.where(c2, i2, tl.where(c3, j, i3))
        d2 = tl.where(c1, d1, tl.where(c2, d, d2))
        i2 = tl.where(c1, i1, tl.where(c2, j, i2))
        d1 = tl.where(c1, d, d1)
        i1 = tl.where(c1, j, i1)
    out = (b * q + rows) * 3
    tl.store(dist2_ptr + out, d1, mask=valid)
    tl.store(dist2_ptr + out + 1, d2, mask=valid)
    tl.store(dist2_ptr + out + 2, d3, mask=valid)
    tl.store(idx_ptr + out, i1.to(tl.int64), mask=valid)
    tl.store(idx_ptr + out + 1, i2.to(tl.int64), mask=valid)
    tl.store(idx_ptr + out + 2, i3.to(tl.int64), mask=valid)


@triton.jit
def _knn_kernel(ref_ptr, query_ptr, dist2_ptr, idx_ptr, m, q, k,
                BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    """The k nearest of BLOCK query points. Each candidate is one int64 key, the bits of its
    squared distance (non-negative float32 bits order as the values) then its index, so that
    keys order as (distance, index) and are distinct. A row keeps its k smallest keys
    unsorted: a reference point replaces the row's largest key when its key is smaller, which,
    as its index is the largest so far, is when its distance is strictly smaller. The kept set
    is therefore the k smallest (distance, index) pairs, equal distances going to the lower
    index, and one sort of the SLOTS keys at the end orders them. Slots past k hold -1: never
    the largest, first after the sort."""
    b, rows, valid, ref_ptr, qx, qy, qz = _query_block(ref_ptr, query_ptr, m, q, BLOCK)
    slots = tl.arange(0, SLOTS)
    # the k slots start above every key (the bits of a NaN above +inf's), distinct
    empty = tl.where(slots < k, (0x7FFFFFFF << 32) | slots.to(tl.int64), -1)
    keys = tl.zeros([BLOCK, SLOTS], dtype=tl.int64) + empty[None, :]
    for j in range(0, m):
        dx = qx - tl.load(ref_ptr + j * 3)
        dy = qy - tl.load(ref_ptr + j * 3 + 1)
        dz = qz - tl.load(ref_ptr + j * 3 + 2)
        d = dx * dx + dy * dy
        d = d + dz * dz
        key = (d.to(tl.int32, bitcast=True).to(tl.int64) << 32) | j
        worst = tl.max(keys, axis=1)
        evict = (keys == worst[:, None]) & (key < worst)[:, None]
        keys = tl.where(evict, key[:, None], keys)
    keys = tl.sort(keys, dim=1)
    column = slots - (SLOTS - k)  # the -1 slots sort first
    out = (b * q + rows)[:, None] * k + column[None, :]
    store = valid[:, None] & (column >= 0)[None, :]
    tl.store(dist2_ptr + out, (keys >> 32).to(tl.int32).to(tl.float32, bitcast=True), mask=store)
    tl.store(idx_ptr + out, keys & 0xFFFFFFFF, mask=store)


class Launch(NamedTuple):
    """One way a wrapper below launches a kernel: the Triton type of each runtime argument (in
    order, as ``triton.runtime.jit.mangle_type`` names it), the constexprs and the options."""
    kernel: triton.runtime.JITFunction
    signature: Dict[str, str]
    constexprs: Dict[str, int]
    options: Dict[str, object]


def _points(*names: str) -> Dict[str, str]:
    return {name: '*fp32' for name in names}


_FPS_ARGS = dict(nearest_ptr='*fp32', out_ptr='*i64', n='i32', num='i32')
_QUERY = dict(BLOCK=_BLOCK, PAD=_PAD)
# Every launch of this module. The wrappers launch only through it (``launch`` refuses arguments
# of other types), and tests/unit/models/test_kernel_compile.py compiles each entry for real GPU
# targets, so what is compiled there is what runs.
LAUNCHES: Tuple[Launch, ...] = (
    Launch(_fps_kernel, dict(_points('xyz_ptr', 'mask_ptr'), **_FPS_ARGS),
           dict(HAS_MASK=False, BLOCK=_BLOCK), dict(_FLAGS, num_warps=_FPS_WARPS)),
    Launch(_fps_kernel, dict(xyz_ptr='*fp32', mask_ptr='*u1', **_FPS_ARGS),
           dict(HAS_MASK=True, BLOCK=_BLOCK), dict(_FLAGS, num_warps=_FPS_WARPS)),
    Launch(_ball_query_kernel,
           dict(_points('xyz_ptr', 'centre_ptr'), out_ptr='*i64', n='i32', s='i32',
                radius2='fp32', nsample='i32'), _QUERY, _FLAGS),
    Launch(_cylinder_query_kernel,
           dict(_points('xyz_ptr', 'centre_ptr', 'rot_ptr', 'radius2_ptr', 'hmax_ptr'),
                out_ptr='*i64', n='i32', s='i32', batch='i32', num_hmax='i32', hmin='fp32',
                nsample='i32'), _QUERY, _FLAGS),
    Launch(_three_nn_kernel,
           dict(_points('ref_ptr', 'query_ptr', 'dist2_ptr'), idx_ptr='*i64', m='i32', q='i32'),
           dict(BLOCK=_THREE_NN_BLOCK), _FLAGS),
    *(Launch(_knn_kernel, dict(_points('ref_ptr', 'query_ptr', 'dist2_ptr'), idx_ptr='*i64',
                               m='i32', q='i32', k='i32'),
             dict(BLOCK=_KNN_BLOCK, SLOTS=slots), _FLAGS) for slots in KNN_SLOTS),
)


def launch(kernel, grid: Tuple[int, ...], *args, table: Optional[Tuple[Launch, ...]] = None,
           **constexprs) -> None:
    """Launch ``kernel`` as its entry of ``table`` (default: this module's :data:`LAUNCHES`;
    :mod:`.normal_kernels` passes its own) for these argument types."""
    types = tuple(mangle_type(arg) for arg in args)
    for entry in LAUNCHES if table is None else table:
        if (entry.kernel is kernel and tuple(entry.signature.values()) == types
                and entry.constexprs == constexprs):
            kernel[grid](*args, **constexprs, **entry.options)
            return
    raise TypeError(f'{kernel.__name__}: no entry in the LAUNCHES of {kernel.fn.__module__} for '
                    f'arguments {types} and constexprs {constexprs} (add one there: the compile '
                    f'test then checks it for the GPU targets)')


def furthest_point_sample(xyz: Tensor, num: int, mask=None) -> Tensor:
    """As :func:`.point_ops.furthest_point_sample`, in one launch (one program per frame)."""
    batch, n, _ = xyz.shape
    xyz = xyz.contiguous()
    out = torch.empty(batch, num, dtype=torch.long, device=xyz.device)
    nearest = torch.empty(batch, n, dtype=xyz.dtype, device=xyz.device)
    mask = None if mask is None else mask.to(torch.bool).contiguous()
    launch(_fps_kernel, (batch, ), xyz, xyz if mask is None else mask, nearest, out, n, num,
            HAS_MASK=mask is not None, BLOCK=_BLOCK)
    return out


def ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    """As :func:`.point_ops.ball_query`, in one launch (one program per centre)."""
    batch, n, _ = xyz.shape
    s = new_xyz.shape[1]
    out = torch.empty(batch, s, nsample, dtype=torch.long, device=xyz.device)
    launch(_ball_query_kernel, (batch * s, ), xyz.contiguous(), new_xyz.contiguous(), out, n, s,
            radius * radius, nsample, **_QUERY)
    return out


@lru_cache(maxsize=64)
def _thresholds(values: Tuple[float, ...], device: torch.device) -> Tensor:
    """A float32 copy of fixed thresholds on the device, made once per (values, device)."""
    return torch.tensor(values, dtype=torch.float32, device=device)


def cylinder_queries(xyz: Tensor, new_xyz: Tensor, rot: Tensor, radii: Sequence[float],
                     hmin: float, hmax: Sequence[float], nsample: int) -> Tensor:
    """Cylinder queries of every (radius, hmax) in one launch -> (R, D, B, S, nsample)."""
    batch, n, _ = xyz.shape
    s = new_xyz.shape[1]
    out = torch.empty(len(radii), len(hmax), batch, s, nsample, dtype=torch.long,
                      device=xyz.device)
    radius2 = _thresholds(tuple(r * r for r in radii), xyz.device)
    top = _thresholds(tuple(hmax), xyz.device)
    grid = (batch * s, len(radii) * len(hmax))
    launch(_cylinder_query_kernel, grid, xyz.contiguous(), new_xyz.contiguous(),
            rot.contiguous(), radius2, top, out, n, s, batch, len(hmax), hmin, nsample, **_QUERY)
    return out


def three_nn(ref: Tensor, query: Tensor) -> Tuple[Tensor, Tensor]:
    """The 3 nearest ``ref`` points of each query point: squared distances (B, Q, 3), ascending,
    and int64 indices (B, Q, 3); with fewer than 3 reference points the tail is inf / 0."""
    batch, q, _ = query.shape
    dist2 = torch.empty(batch, q, 3, dtype=query.dtype, device=query.device)
    idx = torch.empty(batch, q, 3, dtype=torch.long, device=query.device)
    launch(_three_nn_kernel, (batch, triton.cdiv(q, _THREE_NN_BLOCK)), ref.contiguous(),
            query.contiguous(), dist2, idx, ref.shape[1], q, BLOCK=_THREE_NN_BLOCK)
    return dist2, idx


def knn(ref: Tensor, query: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """The ``k`` (4 to ``KNN_SLOTS[-1]``) nearest ``ref`` points of each query point, as
    :func:`.point_ops.knn` orders them: squared distances (B, Q, k') ascending, equal ones by
    index, and int64 indices (B, Q, k'), k' = min(k, M)."""
    batch, q, _ = query.shape
    m = ref.shape[1]
    slots = next(s for s in KNN_SLOTS if s >= k)
    dist2 = torch.empty(batch, q, k, dtype=query.dtype, device=query.device)
    idx = torch.empty(batch, q, k, dtype=torch.long, device=query.device)
    if batch and q:
        launch(_knn_kernel, (batch, triton.cdiv(q, _KNN_BLOCK)), ref.contiguous(),
               query.contiguous(), dist2, idx, m, q, k, BLOCK=_KNN_BLOCK, SLOTS=slots)
    return dist2[..., :min(k, m)], idx[..., :min(k, m)]
