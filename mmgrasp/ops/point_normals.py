"""Per-point normals of a sampled cloud: FineGrasp's second input, by one rule wherever it is
computed (a loader worker, the data preprocessor on the CPU, a CUDA device).

The rule:

- **Point set.** The sampled cloud itself (the ``num_points`` points :class:`LoadGraspScene` or
  :class:`LoadDepthImage` draw, camera frame, before augmentation), as FineGrasp's inference
  (RoboOrchardLab@241bbc6 ``models/finegrasp/processor.py``, ``get_normal``) runs open3d on its
  20 000 sampled points. Its training dataset instead loads per-pixel maps
  (``scenes/<scene>/<camera>/normal/<frame>.npy``, divided by 255) that nothing in the
  repository writes; computing on the whole masked cloud once per frame would have been the
  storable analogue, but there 30 neighbours span ~3 mm, where millimetre depth steps dominate
  (median 10° off the table plane of a synthetic frame, against 3° on the sampled cloud).
- **Neighbourhood.** open3d's ``KDTreeSearchParamHybrid(radius=0.1, max_nn=30)``: the at most
  ``max_nn`` nearest points, the point itself included, whose squared distance
  ``(dx² + dy²) + dz²`` (float64, of the float32 coordinates) is below ``radius²``, nearest
  first. Equal distances go to the lower point index, here and on every device; open3d's k-d
  tree (nanoflann) breaks them in its own visiting order, so a neighbourhood with a tie at its
  last place can differ from open3d's (clouds from depth images, whose points lie on a grid,
  have a few).
- **Normal, sign and scale**: open3d's ``EstimateNormals`` arithmetic, in
  :mod:`.normal_rule`, with the two settings ``orientation`` (``'camera'``: facing the camera;
  ``'solver'``: the sign open3d's eigen-solver gives) and ``scale`` (1, or 1/255 for the
  reference's stored maps). float32 out.

Where it runs: :func:`estimate_normals` takes one cloud (numpy; a k-d tree, about 0.15 s of one
core for 20 000 points); :func:`batch_normals` a (B, N, 3) tensor: on the CPU it runs
:func:`estimate_normals` frame by frame, on CUDA one Triton launch (:mod:`.normal_kernels`,
which neither sorts nor forms a distance matrix), and on CUDA without Triton the torch
reference :func:`batch_normals_reference` (chunked, a few thousand launches). All give the same
bits: the neighbours and their order are defined without ties, and the arithmetic is
elementwise IEEE-754 in a fixed order.
"""
import warnings
from typing import Tuple

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor

from .kernel_scope import kernel_scope
from .normal_rule import check_rule, rule_normals
from .point_ops import triton_kernels

RADIUS = 0.1  # metres, FineGrasp's KDTreeSearchParamHybrid(radius=0.1, max_nn=30)
MAX_NN = 30
_EXTRA = 8  # neighbours asked of the k-d tree beyond max_nn, to see ties at the last place
_CHUNK = 32768  # points per k-d tree query: bounds its (chunk, max_nn + extra, 3) gathers
_CHUNK_ELEMENTS = 1 << 22  # (queries, points) float64 elements per chunk of the reference


def _checked_cloud(points: np.ndarray) -> np.ndarray:
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f'estimate_normals: points must be (N, 3), got shape {points.shape}')
    points = points.astype(np.float64)
    finite = np.isfinite(points).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(f'estimate_normals: point {bad} is not finite: {points[bad].tolist()}')
    return points


def squared_distances(neighbours, query):
    """``(dx² + dy²) + dz²`` of ``neighbours − query`` (numpy or torch, broadcast)."""
    d = neighbours - query
    return (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]


def estimate_normals(points: np.ndarray, radius: float = RADIUS, max_nn: int = MAX_NN,
                     orientation: str = 'camera', scale: float = 1.0) -> np.ndarray:
    """(N, 3) float32 normals of one camera-frame cloud by the module's rule. Deterministic.

    Args:
        points: (N, 3) finite coordinates in metres, any float dtype (computed in float64).
        radius: neighbours lie closer than this, metres.
        max_nn: at most this many neighbours, the point itself included.
        orientation: ``'camera'`` (n · (−p) ≥ 0) or ``'solver'`` (open3d's sign).
        scale: factor of the unit normals (1, or 1/255 as the reference's stored maps).
    """
    radius, max_nn, orientation, scale = check_rule(radius, max_nn, orientation, scale)
    points = _checked_cloud(points)
    normals = np.empty((len(points), 3), np.float32)
    if len(points) == 0:
        return normals
    index, count = kdtree_neighbours(points, radius, max_nn)
    padded = np.concatenate([points, np.zeros((1, 3))])  # row N: no neighbour
    for start in range(0, len(points), _CHUNK):
        part = slice(start, start + _CHUNK)
        normals[part] = rule_normals(points[part], padded[index[part]], count[part],
                                     orientation, scale)
    return normals


def kdtree_neighbours(points: np.ndarray, radius: float, max_nn: int
                      ) -> Tuple[np.ndarray, np.ndarray]:
    """The rule's neighbourhoods of (N, 3) float64 ``points``: (N, max_nn) int64 indices, nearest
    first and equal distances by index (N where there is none), and (N,) counts.

    The k-d tree returns the ``max_nn + 8`` nearest by its own arithmetic; their squared
    distances are recomputed by the rule's and ordered by (distance, index). Where the last of
    them is not farther than the ``max_nn``-th (a tie that may reach beyond what was asked),
    the point's neighbours are recomputed from every point within that distance."""
    n, radius2 = len(points), radius * radius
    tree = cKDTree(points)
    k = max_nn + _EXTRA
    index = np.empty((n, max_nn), np.int64)
    distance2 = np.empty((n, max_nn))
    for start in range(0, n, _CHUNK):
        query = points[start:start + _CHUNK]
        # k as a list: always (m, k), missing neighbours as index n (also for n < k)
        _, found = tree.query(query, k=list(range(1, k + 1)),
                              distance_upper_bound=radius * (1 + 1e-9))
        d2 = squared_distances(points[np.minimum(found, n - 1)], query[:, None])
        d2 = np.where((found < n) & (d2 < radius2), d2, np.inf)
        found = np.where(np.isfinite(d2), found, n)
        # by distance, then index: rows the tree returned otherwise (ties, rounding) re-sorted
        later = d2[:, 1:], found[:, 1:]
        unordered = ((later[0] < d2[:, :-1]) | ((later[0] == d2[:, :-1])
                                                 & (later[1] < found[:, :-1]))).any(axis=1)
        if unordered.any():
            order = np.lexsort((found[unordered], d2[unordered]), axis=1)
            found[unordered] = np.take_along_axis(found[unordered], order, 1)
            d2[unordered] = np.take_along_axis(d2[unordered], order, 1)
        index[start:start + len(query)] = found[:, :max_nn]
        distance2[start:start + len(query)] = d2[:, :max_nn]
        boundary = d2[:, max_nn - 1]
        for row in np.flatnonzero(np.isfinite(d2[:, -1]) & (d2[:, -1] <= boundary * (1 + 1e-12))):
            index[start + row] = _all_within(tree, points, start + row, boundary[row], radius2,
                                             max_nn)
    return index, (index < n).sum(axis=1)


def _all_within(tree: cKDTree, points: np.ndarray, i: int, bound2: float, radius2: float,
                max_nn: int) -> np.ndarray:
    """Point ``i``'s neighbours by the rule from every point not farther than ``bound2``."""
    candidates = np.asarray(tree.query_ball_point(points[i], np.sqrt(bound2) * (1 + 1e-9)),
                            np.int64)
    d2 = squared_distances(points[candidates], points[i])
    candidates, d2 = candidates[d2 < radius2], d2[d2 < radius2]
    chosen = candidates[np.lexsort((candidates, d2))[:max_nn]]
    return np.concatenate([chosen, np.full(max_nn - len(chosen), len(points))])


_WARNED: list = []


def kernels_for(points: Tensor):
    """The module of the normals kernel when it runs on ``points`` (a CUDA tensor, Triton
    importable), else None (with one warning on CUDA). The launch counter
    (:mod:`mmgrasp.analysis.dispatch_count`) replaces this function by its stand-in."""
    if not points.is_cuda:
        return None
    if triton_kernels() is None:
        if not _WARNED:
            _WARNED.append(True)
            warnings.warn('batch_normals on CUDA runs the torch reference (chunked, thousands '
                          'of launches a batch): the Triton kernels do not import',
                          RuntimeWarning, stacklevel=3)
        return None
    from . import normal_kernels
    return normal_kernels


@torch.no_grad()
def batch_normals(points: Tensor, radius: float = RADIUS, max_nn: int = MAX_NN,
                  orientation: str = 'camera', scale: float = 1.0) -> Tensor:
    """(B, N, 3) float32 normals of a batch of camera-frame clouds ((B, N, 3) float32), on their
    device, by the module's rule: the same bits as :func:`estimate_normals` of each frame."""
    radius, max_nn, orientation, scale = check_rule(radius, max_nn, orientation, scale)
    if points.dim() != 3 or points.shape[-1] != 3 or points.dtype != torch.float32:
        raise ValueError(f'batch_normals: points must be (B, N, 3) float32, got '
                         f'{tuple(points.shape)} {points.dtype}')
    kernels = kernels_for(points)
    if kernels is not None:
        with kernel_scope('estimate_normals', 1):
            return kernels.estimate_normals(points, radius, max_nn, orientation, scale)
    if points.is_cuda:
        return batch_normals_reference(points, radius, max_nn, orientation, scale)
    frames = points.detach().numpy()
    return torch.from_numpy(np.stack([estimate_normals(f, radius, max_nn, orientation, scale)
                                      for f in frames]).reshape(points.shape))


@torch.no_grad()
def batch_normals_reference(points: Tensor, radius: float = RADIUS, max_nn: int = MAX_NN,
                            orientation: str = 'camera', scale: float = 1.0) -> Tensor:
    """The rule in torch on any device: an exact chunked neighbour search (no N × N matrix) and
    :func:`.normal_rule.rule_normals`; (B, N, 3) float32 in, the same shape out."""
    radius, max_nn, orientation, scale = check_rule(radius, max_nn, orientation, scale)
    batch, n, _ = points.shape
    cloud = points.reshape(batch * n, 3).double()
    padded = torch.cat([cloud, cloud.new_zeros(1, 3)])  # row B·N: no neighbour
    index = torch.empty(batch, n, max_nn, dtype=torch.int64, device=points.device)
    chunk = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for b in range(batch):  # the search in chunks; the arithmetic once, for the whole batch
        frame = cloud[b * n:(b + 1) * n]
        for start in range(0, n, chunk):
            found, _ = _nearest_reference(frame, frame[start:start + chunk], radius * radius,
                                          max_nn)
            index[b, start:start + len(found)] = torch.where(found < n, found + b * n,
                                                             batch * n)
    index = index.reshape(batch * n, max_nn)
    return rule_normals(cloud, padded[index], (index < batch * n).sum(1), orientation,
                        scale).reshape(points.shape)


def _nearest_reference(cloud: Tensor, query: Tensor, radius2: float, max_nn: int
                       ) -> Tuple[Tensor, Tensor]:
    """(Q, max_nn) neighbour indices of ``query`` in ``cloud`` (len(cloud) where none) by the
    rule, and (Q,) counts: the ``max_nn``-th smallest distance bounds the set, its ties are
    taken in index order, and the set is ordered by (distance, index)."""
    n = len(cloud)
    d2 = squared_distances(cloud[None], query[:, None])
    d2 = torch.where(d2 < radius2, d2, torch.full_like(d2, float('inf')))
    k = min(max_nn, n)
    last = d2.topk(k, dim=1, largest=False).values[:, -1:]
    below = d2 < last
    ties = (d2 == last) & torch.isfinite(last)
    chosen = below | (ties & (ties.cumsum(1) <= k - below.sum(1, keepdim=True)))
    columns = torch.arange(n, device=cloud.device).expand_as(d2)
    index = torch.where(chosen, columns, n).topk(k, dim=1, largest=False).values  # ascending
    near = torch.where(index < n, d2.gather(1, index.clamp(max=n - 1)),
                       torch.full_like(index, 0, dtype=d2.dtype) + float('inf'))
    order = near.sort(dim=1, stable=True).indices  # by distance; index order among equals
    index = index.gather(1, order)
    if k < max_nn:
        index = torch.cat([index, index.new_full((len(index), max_nn - k), n)], 1)
    return index, (index < n).sum(1)
