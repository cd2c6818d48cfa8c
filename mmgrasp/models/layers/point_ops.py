"""Point-cloud ops of pointnet2 (FPS, ball/cylinder query, grouping, interpolation) in pure PyTorch.

All take batched tensors, are vectorised over points, and are deterministic on the CPU. The
samplers and queries return indices and build no autograd graph. Each query works on chunks of
query points, sized so that a chunk's temporaries stay within ``_CHUNK_ELEMENTS`` elements of
each (B, chunk, N) array. The peak memory is then a few hundred MiB at the reference sizes
(B=4, 1024 seeds, 15000-20000 points).

On CUDA the backward passes of the gathers (``group_points``, ``gather_points``,
``three_nn_interpolate``) accumulate gradients with atomics when indices repeat. They are
deterministic there only under ``torch.use_deterministic_algorithms(True)``.
"""
from typing import Optional

import torch
from torch import Tensor

_CHUNK_ELEMENTS = 1 << 23  # 8M elements per (B, chunk, N) temporary (32 MiB in float32)


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
def knn(ref: Tensor, query: Tensor, k: int) -> tuple:
    """k nearest neighbours. ref (B, M, 3), query (B, Q, 3) -> (dist, idx), both (B, Q, k).

    dist is the Euclidean distance, ascending. Distances are exact differences, not the
    matrix-product shortcut of ``cdist``, so near ties are ordered correctly. idx is 0-based.
    The GraspNet ``knn`` package returns 1-based indices shaped (B, k, Q). No gradient flows
    through dist, as with pointnet2's ``three_nn``.
    """
    dists, inds = [], []
    for part in _chunks(query.shape[1], query.shape[0], ref.shape[1]):
        d = torch.cdist(query[:, part], ref, compute_mode='donot_use_mm_for_euclid_dist')
        dist, idx = d.topk(k, dim=-1, largest=False, sorted=True)
        dists.append(dist)
        inds.append(idx)
    return torch.cat(dists, dim=1), torch.cat(inds, dim=1)


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

    A point is inside when its squared distance is < radius². Returns the first nsample
    inside points in index order, padded as in :func:`_first_inside`.
    """
    out = []
    for part in _chunks(new_xyz.shape[1], xyz.shape[0], xyz.shape[1]):
        centre = new_xyz[:, part]
        d2 = sum((xyz[:, None, :, a] - centre[:, :, None, a]) ** 2 for a in range(3))
        out.append(_first_inside(d2 < radius * radius, nsample))
    return torch.cat(out, dim=1)


@torch.no_grad()
def cylinder_query(radius: float, hmin: float, hmax: float, nsample: int, xyz: Tensor,
                   new_xyz: Tensor, rot: Tensor) -> Tensor:
    """pointnet2 cylinder query (GraspNet), -> (B, S, nsample) int64.

    xyz (B, N, 3) points, new_xyz (B, S, 3) centres, rot (B, S, 3, 3) gripper frames. With
    x̂ = Rᵀ(q − c), point q is inside when hmin < x̂₀ < hmax and x̂₁² + x̂₂² < radius². Returns
    the first nsample inside points in index order, padded as in :func:`_first_inside`.
    """
    out = []
    for part in _chunks(new_xyz.shape[1], xyz.shape[0], xyz.shape[1]):
        diff = [xyz[:, None, :, a] - new_xyz[:, part, None, a] for a in range(3)]
        r = rot[:, part, :, :, None]  # (B, s, 3, 3, 1)
        local = [(diff[0] * r[:, :, 0, i]).addcmul_(diff[1], r[:, :, 1, i])
                 .addcmul_(diff[2], r[:, :, 2, i]) for i in range(3)]
        del diff
        inside = (local[0] > hmin) & (local[0] < hmax)
        inside &= local[1].square_().addcmul_(local[2], local[2]) < radius * radius
        out.append(_first_inside(inside, nsample))
    return torch.cat(out, dim=1)


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
