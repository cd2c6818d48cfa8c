"""The sparse voxel tensor the sparse convolutions pass along, its coordinate hash and
:func:`voxelize`; a module of its own so that both backends (:mod:`.sparse_conv`,
:mod:`.spconv_backend`) build it without importing each other.

Coordinates. ``SparseTensor.coords`` rows are ``(batch, x, y, z)`` cell indices on the grid of
cell size ``voxel_size * stride`` (the current resolution). MinkowskiEngine instead keeps stride-1
units that are multiples of the stride; the two differ only by that factor. Rows are unique and
sorted by a 64-bit hash key, so a neighbour lookup is one ``torch.searchsorted``.

Host syncs. Only the coordinate sets have sizes the host must know: :func:`voxelize` with
``levels`` finds a cloud's voxels and its coarser sets in one ``unique`` (two host syncs in
all). The exception to determinism is ``voxelize(reduce='mean')`` on CUDA, where many points
share a voxel: it is deterministic there only under ``torch.use_deterministic_algorithms(True)``.
"""
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

#: Bits per spatial axis of a hash key; the batch index takes the top 9 bits of the int64 key.
KEY_BITS = 18
_FIELD_OFFSET = 1 << (KEY_BITS - 1)
_FIELD_MASK = (1 << KEY_BITS) - 1
#: The largest |dilation * kernel offset| a neighbour lookup may add to a coordinate.
MAX_OFFSET = 63
MAX_ABS_COORD = _FIELD_OFFSET - MAX_OFFSET - 1  # 131008 cells: 655 m at 5 mm
MAX_BATCH = 1 << (63 - 3 * KEY_BITS)


_FIELD_WEIGHTS = (1 << (3 * KEY_BITS), 1 << (2 * KEY_BITS), 1 << KEY_BITS, 1)
_FIELD_BIAS = _FIELD_OFFSET * (_FIELD_WEIGHTS[1] + _FIELD_WEIGHTS[2] + 1)
_WEIGHTS_ON: dict = {}  # device -> the (4,) int64 field weights there


def hash_coords(coords: Tensor) -> Tensor:
    """(…, 4) int64 (batch, x, y, z) -> (…,) int64 keys; key order is row lexicographic order.

    The key is ``batch << 54 | (x + 2^17) << 36 | (y + 2^17) << 18 | (z + 2^17)``. The fields
    do not overlap, so the ors are sums: one weighted sum (three launches, not ten)."""
    weights = _WEIGHTS_ON.get(coords.device)
    if weights is None:
        weights = _WEIGHTS_ON[coords.device] = torch.tensor(_FIELD_WEIGHTS, device=coords.device)
    return (coords * weights).sum(-1) + _FIELD_BIAS


def unhash_coords(keys: Tensor) -> Tensor:
    """(N,) int64 keys -> (N, 4) int64 coordinates; the inverse of :func:`hash_coords`."""
    axes = [keys >> (3 * KEY_BITS)]
    axes += [((keys >> (KEY_BITS * (3 - axis))) & _FIELD_MASK) - _FIELD_OFFSET
             for axis in range(1, 4)]
    return torch.stack(axes, dim=1)


@dataclass(eq=False)
class SpconvState:
    """The spconv tensor of a :class:`SparseTensor`'s rows (its features are
    stale: the SparseTensor's are current) and the cell at spconv index 0 at that stride, as
    Python ints (for the checks, no host read) and on the rows' device (for the coordinates)."""
    tensor: object  # spconv.pytorch.SparseConvTensor
    origin: Tuple[int, int, int]
    origin_cells: Tensor  # (3,) int64, equal to origin

    def strided(self, tensor, stride: int) -> 'SpconvState':
        """The state of ``tensor``, a stride-``stride`` conv's output of these rows."""
        return SpconvState(tensor, tuple(o // stride for o in self.origin),
                           self.origin_cells.div(stride, rounding_mode='floor'))


@dataclass(eq=False)
class SparseTensor:
    """Features on occupied voxels.

    Attributes:
        coords: (N, 4) int64 (batch, x, y, z), unique, sorted by :func:`hash_coords`.
        feats: (N, C) float.
        stride: cell size in units of the voxel size.
        keys: (N,) sorted hash keys; computed (and the order checked) when omitted.
        cache: kernel maps and coarser coordinate sets, shared by all tensors of one forward.
        spconv: the spconv tensor of these rows, on tensors that spconv-backend layers made. A
            strided spconv layer's rows are in spconv's order, not sorted: they have no keys.
    """
    coords: Tensor
    feats: Tensor
    stride: int = 1
    keys: Optional[Tensor] = None
    cache: dict = field(default_factory=dict, repr=False)
    spconv: Optional[SpconvState] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.keys is None and self.spconv is None:
            self.keys = hash_coords(self.coords)
            if self.keys.numel() > 1 and not bool((self.keys[1:] > self.keys[:-1]).all()):
                raise ValueError('coords must be unique and sorted by hash_coords')

    def replace(self, feats: Tensor) -> 'SparseTensor':
        """Same coordinates (same objects, so cached maps apply), new features."""
        return SparseTensor(self.coords, feats, self.stride, self.keys, self.cache,
                            self.spconv)


def sparse_cat(*tensors: SparseTensor) -> SparseTensor:
    """Concatenate features of tensors on the same coordinate set (like ``ME.cat``)."""
    first = tensors[0]
    if any(t.coords is not first.coords for t in tensors[1:]):
        raise ValueError('sparse_cat needs tensors on the same coordinate set')
    return first.replace(torch.cat([t.feats for t in tensors], dim=1))


def voxelize(points: Union[Tensor, Sequence[Tensor]], voxel_size: float,
             feats: Union[Tensor, Sequence[Tensor], None] = None, reduce: str = 'mean',
             levels: int = 0) -> tuple:
    """Quantise point clouds into a stride-1 :class:`SparseTensor`.

    Args:
        points: (B, N, 3) tensor or a list of (N_i, 3) tensors, in metres.
        voxel_size: cell edge in metres.
        feats: matching (B, N, C) tensor or list of (N_i, C); None gives one channel of ones.
        reduce: 'mean' averages the features of the points in a voxel; 'first' takes the
            lowest-index point's (deterministic on CUDA too, see the module docstring).
        levels: also find the coordinate sets of strides 2, 4, ..., 2**levels (what a U-Net's
            stride-2 convolutions output) and cache them, in the same ``unique``.

    Returns:
        (SparseTensor, point_to_voxel): point_to_voxel (sum N_i,) int64 maps every point, in
        batch-major order, to its voxel row, so ``out.feats[point_to_voxel]`` gives per-point
        features back (GSNet's ``quantize2original``).

    Cells are ``floor(xyz / voxel_size)``. GSNet passes ``xyz / voxel_size`` to
    ``ME.utils.sparse_collate``, which may truncate instead. Truncation would merge the cells
    on either side of 0 into one double-width cell. Floor keeps the grid uniform.

    Two host syncs whatever ``levels``: the ``unique``, and one read of the set sizes and the
    largest coordinate. Level l's cells go into the same ``unique`` with batch index
    ``l * B + b``; the batch field is the keys' top bits, so each level is one run of the
    sorted keys and level 0's run, and its inverse, are exactly those of level 0 alone.
    """
    points = list(points)
    feats = [p.new_ones(len(p), 1) for p in points] if feats is None else list(feats)
    batch_size = len(points)
    if batch_size * (levels + 1) > MAX_BATCH:
        raise ValueError(f'at most {MAX_BATCH // (levels + 1)} samples per batch with '
                         f'levels={levels}')
    xyz = torch.cat(points, dim=0)
    batch = torch.cat([torch.full((len(p),), i, dtype=torch.long, device=xyz.device)
                       for i, p in enumerate(points)])
    cells = torch.floor(xyz.detach() / voxel_size).long()
    rows = [torch.cat([batch[:, None], cells], dim=1)]
    for level in range(1, levels + 1):
        rows.append(torch.cat([batch[:, None] + level * batch_size, cells >> level], dim=1))
    keys, inverse = torch.unique(hash_coords(torch.cat(rows)), sorted=True,
                                 return_inverse=True)
    starts = torch.arange(1, levels + 1, device=keys.device) * batch_size << (3 * KEY_BITS)
    largest = cells.abs().amax() if cells.numel() else cells.new_zeros(())
    *bounds, largest = torch.cat([torch.searchsorted(keys, starts), largest[None]]).tolist()
    bounds = [0] + bounds + [len(keys)]
    if largest > MAX_ABS_COORD:
        low, high = xyz.detach().amin(dim=0).tolist(), xyz.detach().amax(dim=0).tolist()
        raise ValueError(
            f'points beyond {MAX_ABS_COORD} voxels ({MAX_ABS_COORD * voxel_size:g} m at voxel '
            f'size {voxel_size:g} m) from the origin: the cloud spans x {low[0]:.4g}..'
            f'{high[0]:.4g}, y {low[1]:.4g}..{high[1]:.4g}, z (depth) {low[2]:.4g}..'
            f'{high[2]:.4g} m. The depth scale is probably wrong: points must be in metres '
            f'(depth / factor_depth; GraspNet-1Billion PNGs are millimetres, factor_depth '
            f'1000), or the depth image holds invalid readings (e.g. 65535) that a workspace '
            f'mask or max_depth should remove')
    coords = unhash_coords(keys)
    coords[:, 0] %= max(batch_size, 1)
    sets = [(coords[lo:hi], keys[lo:hi] - ((level * batch_size) << (3 * KEY_BITS)))
            for level, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
    point_to_voxel = inverse[:len(xyz)]
    n_voxels = bounds[1]
    point_feats = torch.cat(feats, dim=0)
    if reduce == 'mean':
        count = point_feats.new_zeros(n_voxels).index_add_(
            0, point_to_voxel, point_feats.new_ones(len(xyz)))
        summed = point_feats.new_zeros(n_voxels, point_feats.shape[1])
        voxel_feats = summed.index_add_(0, point_to_voxel, point_feats) / count[:, None]
    elif reduce == 'first':
        order = torch.arange(len(xyz), device=xyz.device)
        first = torch.full((n_voxels,), len(xyz), dtype=torch.long, device=xyz.device)
        first.scatter_reduce_(0, point_to_voxel, order, reduce='amin')
        voxel_feats = point_feats[first]
    else:
        raise ValueError(f"reduce must be 'mean' or 'first', got {reduce!r}")
    out = SparseTensor(sets[0][0], voxel_feats, 1, sets[0][1])
    for (fine, _), (coarse, coarse_keys) in zip(sets, sets[1:]):
        out.cache[('down', id(fine), 2)] = (fine, coarse, coarse_keys)
    return out, point_to_voxel
