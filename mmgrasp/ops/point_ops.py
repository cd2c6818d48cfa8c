"""Point-cloud ops of pointnet2 (FPS, ball/cylinder query, grouping, interpolation).

Each sampler and query has a pure-PyTorch reference (the CPU path) and, on CUDA tensors with
Triton installed, a one-launch kernel (:mod:`.point_kernels`) that returns the same indices,
launched inside ``kernel_scope(name, 1)`` so that the launch counter charges it one launch.
The detectors' ``point_ops`` (a model config key: :mod:`.numerics`) chooses, for their forward
passes (:func:`.numerics.point_ops_backend`), between the two: ``auto`` (the default: the
kernels on CUDA tensors; without Triton the references, with one warning saying so), ``torch``
or ``triton`` (the kernels on every tensor: on CPU tensors under ``TRITON_INTERPRET=1``, as
the launch counter runs the CUDA path). The references take
batched tensors, are vectorised over points, and are deterministic on the CPU. The
samplers and queries return indices and build no autograd graph. Each query works on chunks of
query points, sized so that a chunk's temporaries stay within ``_CHUNK_ELEMENTS`` elements of
each (B, chunk, N) array. The peak memory is then a few hundred MiB at the reference sizes
(B=4, 1024 seeds, 15000-20000 points).

On CUDA the backward passes of the gathers (``group_points``, ``gather_points``,
``three_nn_interpolate``) accumulate gradients with atomics when indices repeat. They are
deterministic there only under ``torch.use_deterministic_algorithms(True)``.
"""
import warnings
from functools import lru_cache
from types import ModuleType
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from .kernel_scope import kernel_scope
from .numerics import current_point_ops

_CHUNK_ELEMENTS = 1 << 23  # 8M elements per (B, chunk, N) temporary (32 MiB in float32)
KNN_KERNEL_MAX_K = 16  # the largest k of knn's kernel (point_kernels.KNN_SLOTS)


_TRITON_MISSING: list = []  # why the kernels module failed to import, once it has


@lru_cache(maxsize=1)
def triton_kernels() -> Optional[ModuleType]:
    """The Triton kernels module, or None when Triton is not installed."""
    try:
        from . import point_kernels
    except ImportError as error:
        _TRITON_MISSING.append(f'{type(error).__name__}: {error}')
        return None
    return point_kernels


_WARNED: list = []  # the auto fallback warns once a process


def _kernels_for(tensor: Tensor) -> Optional[ModuleType]:
    """The Triton kernels when they run on ``tensor`` (see the module docstring), else None."""
    choice = current_point_ops()
    if choice == 'torch' or (choice == 'auto' and not tensor.is_cuda):
        return None
    kernels = triton_kernels()
    if kernels is None:
        why = _TRITON_MISSING[0] if _TRITON_MISSING else 'not importable'
        if choice == 'triton':
            raise ImportError(f"point_ops='triton' needs triton (pip install triton): {why}")
        if not _WARNED:
            _WARNED.append(why)
            warnings.warn(f"point_ops='auto' on CUDA tensors runs the torch references (Python "
                          f"loops, thousands of launches an iteration): the Triton kernels do "
                          f"not import ({why})", RuntimeWarning, stacklevel=3)
    return kernels


def _chunks(total: int, batch: int, width: int):
    size = max(1, _CHUNK_ELEMENTS // max(1, batch * width))
    for start in range(0, total, size):
        yield slice(start, min(start + size, total))


@torch.no_grad()
def furthest_point_sample(xyz: Tensor, num: int, mask: Optional[Tensor] = None) -> Tensor:
    """Furthest point sampling, (B, N, 3) -> (B, num) int64 indices.

    Like pointnet2, it starts at index 0 (with ``mask``: the first masked-in point), then
    repeatedly takes the point with the largest squared distance to the chosen set. Ties go
    to the lowest index. Only masked-in points are eligible. A sample with c < num eligible
    points returns its c picks repeated cyclically (idx[j] = idx[j % c]). With c = 0 it
    returns zeros. pointnet2's kernel also never picks points within ~3 cm of the origin
    (``mag <= 1e-3``); this one does not copy that quirk.

    The loop is inherently sequential, so each step is seven operations into preallocated
    buffers on a (B, 3, N) copy of the points (contiguous per axis): no allocation, no host
    synchronisation, and the squared distance is summed as ``(dx² + dy²) + dz²``, the order of
    the reduction it replaces, so the indices are those of the earlier implementation.
    """
    kernels = _kernels_for(xyz)
    if kernels is not None and num > 0:
        with kernel_scope('furthest_point_sample', 1):
            return kernels.furthest_point_sample(xyz, num, mask)
    return _furthest_point_sample_reference(xyz, num, mask)


def _furthest_point_sample_reference(xyz: Tensor, num: int, mask: Optional[Tensor]) -> Tensor:
    batch, n, _ = xyz.shape
    if num == 0:
        return torch.zeros(batch, 0, dtype=torch.long, device=xyz.device)
    eligible = torch.ones(batch, n, dtype=torch.bool, device=xyz.device) if mask is None \
        else mask.bool()
    planes = xyz.transpose(1, 2).contiguous()  # (B, 3, N)
    nearest = torch.where(eligible, torch.full_like(planes[:, 0], 1e10),
                          torch.full_like(planes[:, 0], -1.0))  # ineligible points stay at -1
    picks = torch.empty(num, batch, 1, dtype=torch.long, device=xyz.device)
    picks[0] = eligible.to(torch.uint8).argmax(dim=1, keepdim=True)  # first eligible (0 if none)
    centre = planes.new_empty(batch, 3, 1)
    diff = torch.empty_like(planes)
    dist = torch.empty_like(nearest)
    for j in range(num - 1):
        torch.gather(planes, 2, picks[j, :, None].expand(-1, 3, -1), out=centre)
        torch.sub(planes, centre, out=diff)
        diff.mul_(diff)
        torch.add(diff[:, 0], diff[:, 1], out=dist)
        dist.add_(diff[:, 2])
        torch.minimum(nearest, dist, out=nearest)
        torch.argmax(nearest, dim=1, keepdim=True, out=picks[j + 1])
    idx = picks[..., 0].T
    count = eligible.sum(dim=1, keepdim=True).clamp_(min=1, max=num)
    wrapped = torch.arange(num, device=xyz.device)[None] % count
    return idx.gather(1, wrapped)


@torch.no_grad()
def knn(ref: Tensor, query: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """k nearest neighbours. ref (B, M, 3), query (B, Q, 3) -> (dist, idx), both (B, Q, k).

    dist is the Euclidean distance, ascending, from squared distances summed as
    ``(dx² + dy²) + dz²`` of exact differences (not the matrix-product shortcut, so near ties
    are ordered correctly); equal distances go to the lower index. idx is 0-based. The
    GraspNet ``knn`` package returns 1-based indices shaped (B, k, Q). No gradient flows
    through dist, as with pointnet2's ``three_nn``. With fewer than k reference points, the
    k > 3 paths return all M of them. On CUDA it is one launch for k <= ``KNN_KERNEL_MAX_K``
    (k <= 3: ``three_nn``'s).
    """
    kernels = None if k > KNN_KERNEL_MAX_K else _kernels_for(query)
    if kernels is None:
        dist2, idx = _knn_reference(ref, query, k)
        return dist2.sqrt(), idx
    if k > 3:
        with kernel_scope('knn', 1):
            dist2, idx = kernels.knn(ref, query, k)
        return dist2.sqrt(), idx
    with kernel_scope('three_nn', 1):
        dist2, idx = kernels.three_nn(ref, query)
    return dist2[..., :k].sqrt(), idx[..., :k]


def _knn_reference(ref: Tensor, query: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """Squared distances and indices of the k nearest, as :func:`knn` describes."""
    dists, inds = [], []
    for part in _chunks(query.shape[1], query.shape[0], ref.shape[1]):
        diff = [query[:, part, None, a] - ref[:, None, :, a] for a in range(3)]
        dist2 = (diff[0] * diff[0] + diff[1] * diff[1]) + diff[2] * diff[2]
        if k > 3:
            dist2, idx = dist2.sort(dim=-1, stable=True)
            # copies, not views: a view would keep the chunk's whole (B, chunk, M) sort alive
            dists.append(dist2[..., :k].clone())
            inds.append(idx[..., :k].clone())
            continue
        picked = []  # k rounds of the first minimum, each taken out: cheaper than a sort
        for _ in range(k):
            picked.append(dist2.min(dim=-1, keepdim=True))
            dist2.scatter_(-1, picked[-1].indices, float('inf'))
        dists.append(torch.cat([p.values for p in picked], dim=-1))
        inds.append(torch.cat([p.indices for p in picked], dim=-1))
    return torch.cat(dists, dim=1), torch.cat(inds, dim=1)


@torch.no_grad()
def nearest_squared_distance(ref: Tensor, query: Tensor) -> Tensor:
    """ref (B, M, 3), query (B, Q, 3) -> (B, Q): the squared distance ``(dx² + dy²) + dz²`` of
    each query point to its nearest ref point, in the inputs' dtype (in float64 of float32
    points: scipy's ``cKDTree.query(k=1)`` squared distances, bit for bit; no square root here,
    as torch's is not always numpy's to the last bit). Torch ops on any device, one pass over
    chunks of the query points: eight launches a chunk of ``_CHUNK_ELEMENTS`` (B, chunk, M)
    elements."""
    out = []
    for part in _chunks(query.shape[1], query.shape[0], ref.shape[1]):
        diff = [query[:, part, None, a] - ref[:, None, :, a] for a in range(3)]
        dist2 = (diff[0] * diff[0] + diff[1] * diff[1]) + diff[2] * diff[2]
        del diff
        out.append(dist2.amin(dim=-1))
    return torch.cat(out, dim=1) if out else query.new_zeros(query.shape[:2])


def _first_inside(inside: Tensor, nsample: int) -> Tensor:
    """(B, S, N) bool -> (B, S, nsample): the first nsample True columns in index order.

    Rows are padded with their first hit, or are all 0 if the row has no hit. This is the
    output pointnet2's CUDA kernels write.
    """
    n = inside.shape[-1]
    columns = torch.arange(n, device=inside.device)
    candidates = torch.where(inside, columns, n)
    first = candidates.topk(min(nsample, n), dim=-1, largest=False, sorted=True).values
    if nsample > n:
        first = torch.cat([first, first.new_full((*first.shape[:-1], nsample - n), n)], -1)
    head = first[..., :1]
    first = torch.where(first == n, head, first)
    return torch.where(first == n, 0, first)


@torch.no_grad()
def ball_query(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    """pointnet2 ball query: xyz (B, N, 3), new_xyz (B, S, 3) -> (B, S, nsample) int64.

    A point is inside when its squared distance ``(dx² + dy²) + dz²`` is < radius² (float32).
    Returns the first nsample inside points in index order, padded as in :func:`_first_inside`.
    """
    kernels = _kernels_for(xyz)
    if kernels is not None:
        with kernel_scope('ball_query', 1):
            return kernels.ball_query(radius, nsample, xyz, new_xyz)
    out = []
    for part in _chunks(new_xyz.shape[1], xyz.shape[0], xyz.shape[1]):
        diff = [xyz[:, None, :, a] - new_xyz[:, part, None, a] for a in range(3)]
        d2 = (diff[0] * diff[0] + diff[1] * diff[1]) + diff[2] * diff[2]
        del diff
        out.append(_first_inside(d2 < radius * radius, nsample))
    return torch.cat(out, dim=1)


@torch.no_grad()
def cylinder_queries(xyz: Tensor, new_xyz: Tensor, rot: Tensor, radii: Sequence[float],
                     hmin: float, hmax: Sequence[float], nsample: int) -> Tensor:
    """pointnet2 cylinder queries (GraspNet) of several radii and upper heights at once,
    -> (R, D, B, S, nsample) int64.

    xyz (B, N, 3) points, new_xyz (B, S, 3) centres, rot (B, S, 3, 3) gripper frames. With
    x̂ = Rᵀ(q − c) (x̂ᵢ = (d₀R₀ᵢ + d₁R₁ᵢ) + d₂R₂ᵢ), point q is inside for (radius, top) when
    hmin < x̂₀ < top and x̂₁² + x̂₂² < radius² (thresholds in float32). Returns the first nsample
    inside points in index order, padded as in :func:`_first_inside`. The gripper-frame
    coordinates, which dominate the cost, are computed once for all (radius, top); on CUDA all
    of them are one launch.
    """
    kernels = _kernels_for(xyz)
    if kernels is not None:
        with kernel_scope('cylinder_query', 1):
            return kernels.cylinder_queries(xyz, new_xyz, rot, radii, hmin, hmax, nsample)
    batch, n, _ = xyz.shape
    s = new_xyz.shape[1]
    out = xyz.new_empty((len(radii), len(hmax), batch, s, nsample), dtype=torch.int64)
    for part in _chunks(s, batch, n):
        diff = [xyz[:, None, :, a] - new_xyz[:, part, None, a] for a in range(3)]
        r = rot[:, part, :, :, None]  # (B, s, 3, 3, 1)
        term = torch.empty_like(diff[0])
        local = []
        for i in range(3):  # (d0·R0i + d1·R1i) + d2·R2i, no temporaries but one
            x = diff[0] * r[:, :, 0, i]
            x += torch.mul(diff[1], r[:, :, 1, i], out=term)
            x += torch.mul(diff[2], r[:, :, 2, i], out=term)
            local.append(x)
        del diff
        radial = local[1].square_()
        radial += torch.mul(local[2], local[2], out=term)
        above = local[0] > hmin
        for d, top in enumerate(hmax):
            height = above & (local[0] < top)
            for i, radius in enumerate(radii):
                out[i, d, :, part] = _first_inside(height & (radial < radius * radius),
                                                   nsample)
    return out


def cylinder_query(radius: float, hmin: float, hmax: float, nsample: int, xyz: Tensor,
                   new_xyz: Tensor, rot: Tensor) -> Tensor:
    """One cylinder query (pointnet2's ``cylinder_query``) -> (B, S, nsample) int64; see
    :func:`cylinder_queries`."""
    return cylinder_queries(xyz, new_xyz, rot, (radius, ), hmin, (hmax, ), nsample)[0, 0]


def group_points(features: Tensor, idx: Tensor) -> Tensor:
    """features (B, C, N), idx (B, S, k) -> (B, C, S, k)."""
    batch, channels, _ = features.shape
    flat = idx.reshape(batch, 1, -1).expand(-1, channels, -1)
    return features.gather(2, flat).view(batch, channels, *idx.shape[1:])


def gather_points(features: Tensor, idx: Tensor) -> Tensor:
    """features (B, C, N), idx (B, S) -> (B, C, S)."""
    return features.gather(2, idx[:, None].expand(-1, features.shape[1], -1))


def three_nn_interpolate(unknown: Tensor, known: Tensor, known_feats: Tensor) -> Tensor:
    """pointnet2 feature propagation: unknown (B, n, 3), known (B, m, 3), known_feats (B, C, m)
    -> (B, C, n).

    Each unknown point gets its 3 nearest known points weighted by 1 / (distance + 1e-8),
    normalised to sum to 1, as in pointnet2's ``PointnetFPModule``. With m < 3 it uses all m.
    """
    dist, idx = knn(known, unknown, min(3, known.shape[1]))
    weight = 1.0 / (dist + 1e-8)
    weight = weight / weight.sum(dim=-1, keepdim=True)
    return (group_points(known_feats, idx) * weight[:, None]).sum(dim=-1)
