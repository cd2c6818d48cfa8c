"""Sparse voxel convolution in pure PyTorch, in the manner of MinkowskiEngine (no compiled ops).

Coordinates. ``SparseTensor.coords`` rows are ``(batch, x, y, z)`` cell indices on the grid of
cell size ``voxel_size * stride`` (the current resolution). MinkowskiEngine instead keeps stride-1
units that are multiples of the stride; the two differ only by that factor. Rows are unique and
sorted by a 64-bit hash key, so a neighbour lookup is one ``torch.searchsorted``.

Kernel maps. A convolution pairs input row ``p`` with output row ``q`` through kernel offset ``o``
when ``p = stride * q + dilation * o``; a transposed convolution when
``q = stride * p + dilation * o``. Offsets run over ``-((k - 1) // 2) .. k - 1 - (k - 1) // 2`` on
each axis: centred for odd k (``F.conv3d`` with ``padding=(k - 1) // 2``), ``{0, 1}`` for k = 2.
With kernel 2 and stride 2 every input cell therefore feeds exactly the coarser cell containing
it, as in MinkowskiEngine's downsampling. Maps are cached in ``SparseTensor.cache``, a dict shared
by every tensor derived from one :func:`voxelize` call, so a U-Net builds each map once per
forward.

Determinism. Each offset is accumulated by one ``index_add_``. Within one offset, every output
row and every input row occurs at most once, so no address receives two additions, and the
offsets run in a fixed order. Results are bit-reproducible on the CPU (tested). On CUDA,
``index_add_`` uses atomics, but here they never collide, so the same holds by construction (not
verified on a GPU). The exception is ``voxelize(reduce='mean')`` on CUDA, where many points share
a voxel: it is deterministic there only under ``torch.use_deterministic_algorithms(True)``.
"""
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

_BITS = 18  # per spatial axis; the batch index takes the top 9 bits of the int64 key
_FIELD_OFFSET = 1 << (_BITS - 1)
_FIELD_MASK = (1 << _BITS) - 1
_MAX_OFFSET = 63  # largest |dilation * kernel offset| a lookup may add
MAX_ABS_COORD = _FIELD_OFFSET - _MAX_OFFSET - 1  # 131008 cells: 655 m at 5 mm
MAX_BATCH = 1 << (63 - 3 * _BITS)


def hash_coords(coords: Tensor) -> Tensor:
    """(…, 4) int64 (batch, x, y, z) -> (…,) int64 keys; key order is row lexicographic order."""
    key = coords[..., 0] << (3 * _BITS)
    for axis in range(1, 4):
        key = key | ((coords[..., axis] + _FIELD_OFFSET) << (_BITS * (3 - axis)))
    return key


def unhash_coords(keys: Tensor) -> Tensor:
    """(N,) int64 keys -> (N, 4) int64 coordinates; the inverse of :func:`hash_coords`."""
    axes = [keys >> (3 * _BITS)]
    axes += [((keys >> (_BITS * (3 - axis))) & _FIELD_MASK) - _FIELD_OFFSET for axis in range(1, 4)]
    return torch.stack(axes, dim=1)


@dataclass(eq=False)
class SparseTensor:
    """Features on occupied voxels.

    coords: (N, 4) int64 (batch, x, y, z), unique, sorted by :func:`hash_coords`.
    feats: (N, C) float. stride: cell size in units of the voxel size.
    keys: (N,) sorted hash keys; computed (and the order checked) when omitted.
    cache: kernel maps and coarser coordinate sets, shared by all tensors of one forward.
    """
    coords: Tensor
    feats: Tensor
    stride: int = 1
    keys: Optional[Tensor] = None
    cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.keys is None:
            self.keys = hash_coords(self.coords)
            if self.keys.numel() > 1 and not bool((self.keys[1:] > self.keys[:-1]).all()):
                raise ValueError('coords must be unique and sorted by hash_coords')

    def replace(self, feats: Tensor) -> 'SparseTensor':
        """Same coordinates (same objects, so cached maps apply), new features."""
        return SparseTensor(self.coords, feats, self.stride, self.keys, self.cache)


def sparse_cat(*tensors: SparseTensor) -> SparseTensor:
    """Concatenate features of tensors on the same coordinate set (like ``ME.cat``)."""
    first = tensors[0]
    if any(t.coords is not first.coords for t in tensors[1:]):
        raise ValueError('sparse_cat needs tensors on the same coordinate set')
    return first.replace(torch.cat([t.feats for t in tensors], dim=1))


def voxelize(points: Union[Tensor, Sequence[Tensor]], voxel_size: float,
             feats: Union[Tensor, Sequence[Tensor], None] = None, reduce: str = 'mean') -> tuple:
    """Quantise point clouds into a stride-1 :class:`SparseTensor`.

    Args:
        points: (B, N, 3) tensor or a list of (N_i, 3) tensors, in metres.
        voxel_size: cell edge in metres.
        feats: matching (B, N, C) tensor or list of (N_i, C); None gives one channel of ones.
        reduce: 'mean' averages the features of the points in a voxel; 'first' takes the
            lowest-index point's (deterministic on CUDA too, see the module docstring).

    Returns:
        (SparseTensor, point_to_voxel): point_to_voxel (sum N_i,) int64 maps every point, in
        batch-major order, to its voxel row, so ``out.feats[point_to_voxel]`` gives per-point
        features back (GSNet's ``quantize2original``).

    Cells are ``floor(xyz / voxel_size)``. GSNet passes ``xyz / voxel_size`` to
    ``ME.utils.sparse_collate``, which may truncate instead. Truncation would merge the cells
    on either side of 0 into one double-width cell. Floor keeps the grid uniform.
    """
    points = list(points)
    feats = [p.new_ones(len(p), 1) for p in points] if feats is None else list(feats)
    if len(points) > MAX_BATCH:
        raise ValueError(f'at most {MAX_BATCH} samples per batch')
    xyz = torch.cat(points, dim=0)
    batch = torch.cat([torch.full((len(p),), i, dtype=torch.long, device=xyz.device)
                       for i, p in enumerate(points)])
    cells = torch.floor(xyz.detach() / voxel_size).long()
    if cells.numel() and int(cells.abs().max()) > MAX_ABS_COORD:
        low, high = xyz.detach().amin(dim=0).tolist(), xyz.detach().amax(dim=0).tolist()
        raise ValueError(
            f'points beyond {MAX_ABS_COORD} voxels ({MAX_ABS_COORD * voxel_size:g} m at voxel '
            f'size {voxel_size:g} m) from the origin: the cloud spans x {low[0]:.4g}..'
            f'{high[0]:.4g}, y {low[1]:.4g}..{high[1]:.4g}, z (depth) {low[2]:.4g}..'
            f'{high[2]:.4g} m. The depth scale is probably wrong: points must be in metres '
            f'(depth / factor_depth; GraspNet-1Billion PNGs are millimetres, factor_depth '
            f'1000), or the depth image holds invalid readings (e.g. 65535) that a workspace '
            f'mask or max_depth should remove')
    keys, point_to_voxel = torch.unique(hash_coords(torch.cat([batch[:, None], cells], dim=1)),
                                        sorted=True, return_inverse=True)
    point_feats = torch.cat(feats, dim=0)
    if reduce == 'mean':
        count = torch.bincount(point_to_voxel, minlength=len(keys)).to(point_feats.dtype)
        summed = point_feats.new_zeros(len(keys), point_feats.shape[1])
        voxel_feats = summed.index_add_(0, point_to_voxel, point_feats) / count[:, None]
    elif reduce == 'first':
        order = torch.arange(len(xyz), device=xyz.device)
        first = torch.full((len(keys),), len(xyz), dtype=torch.long, device=xyz.device)
        first.scatter_reduce_(0, point_to_voxel, order, reduce='amin')
        voxel_feats = point_feats[first]
    else:
        raise ValueError(f"reduce must be 'mean' or 'first', got {reduce!r}")
    return SparseTensor(unhash_coords(keys), voxel_feats, 1, keys), point_to_voxel


def kernel_offsets(kernel_size: int, dilation: int = 1, device=None) -> Tensor:
    """(k³, 3) int64 offsets, x slowest and z fastest, matching a dense (k, k, k) kernel."""
    axis = torch.arange(kernel_size, device=device) - (kernel_size - 1) // 2
    return torch.cartesian_prod(axis, axis, axis) * dilation


def _kernel_map(in_keys: Tensor, out_coords: Tensor, offsets: Tensor, stride: int,
                transposed: bool) -> list:
    """[(offset index, input rows, output rows)] for the offsets with at least one pair."""
    if len(in_keys) == 0 or len(out_coords) == 0:
        return []
    batch, cell = out_coords[:, :1], out_coords[:, 1:]
    if transposed:
        diff = cell[None] - offsets[:, None]
        valid = (diff.remainder(stride) == 0).all(-1)
        source = diff.div(stride, rounding_mode='floor')
        query = hash_coords(torch.cat([batch[None].expand(len(offsets), -1, -1), source], -1))
    else:
        # Fields never carry (MAX_ABS_COORD leaves room for any offset), so the key of
        # (b, p + o) is key(b, p) plus the offset's own key: no (K, N, 4) temporaries.
        valid = None
        base = hash_coords(torch.cat([batch, cell * stride], dim=1))
        delta = (offsets[:, 0] << (2 * _BITS)) + (offsets[:, 1] << _BITS) + offsets[:, 2]
        query = base[None] + delta[:, None]
    pos = torch.searchsorted(in_keys, query).clamp_(max=len(in_keys) - 1)
    hit = in_keys[pos] == query
    if valid is not None:
        hit &= valid
    k_idx, out_idx = hit.nonzero(as_tuple=True)  # row-major: grouped by offset
    in_idx = pos[k_idx, out_idx]
    counts = torch.bincount(k_idx, minlength=len(offsets)).tolist()
    pairs = zip(torch.split(in_idx, counts), torch.split(out_idx, counts))
    return [(k, i, o) for k, (i, o) in enumerate(pairs) if counts[k]]


def _downsampled(x: SparseTensor, stride: int) -> tuple:
    """Coordinates and keys of ``unique(floor(coords / stride))``, shared per input set."""
    key = ('down', id(x.coords), stride)
    if key not in x.cache:
        cells = torch.cat([x.coords[:, :1], x.coords[:, 1:].div(stride, rounding_mode='floor')], 1)
        keys = torch.unique(hash_coords(cells), sorted=True)
        x.cache[key] = (x.coords, unhash_coords(keys), keys)
    return x.cache[key][1:]


class _SparseConvBase(nn.Module):
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
                 dilation: int, bias: bool) -> None:
        super().__init__()
        if dilation * (kernel_size // 2 + 1) > _MAX_OFFSET:
            raise ValueError('kernel_size * dilation too large for the coordinate hash')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = kernel_size, stride, dilation
        volume = kernel_size ** 3
        self.weight = nn.Parameter(torch.empty(volume, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        # MinkowskiEngine's kaiming_normal_(mode='fan_out', relu): fan_out = volume * C_out.
        nn.init.normal_(self.weight, std=math.sqrt(2.0 / (volume * out_channels)))
        # A stride-1 convolution's zero offset pairs every row with itself: one plain matmul.
        self._centre = int((kernel_offsets(kernel_size) == 0).all(1).nonzero()) \
            if stride == 1 and not self.transposed else None

    def extra_repr(self) -> str:
        return (f'{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, '
                f'stride={self.stride}, dilation={self.dilation}, bias={self.bias is not None}')

    def _maps(self, x: SparseTensor, out: SparseTensor) -> list:
        key = ('map', id(x.coords), id(out.coords), self.kernel_size, self.stride,
               self.dilation, self.transposed)
        if key not in x.cache:
            offsets = kernel_offsets(self.kernel_size, self.dilation, x.coords.device)
            maps = _kernel_map(x.keys, out.coords, offsets, self.stride, self.transposed)
            maps = [m for m in maps if m[0] != self._centre]
            # The coordinate tensors ride along so their ids stay unique while the cache lives.
            x.cache[key] = (x.coords, out.coords, maps)
        return x.cache[key][2]

    def _convolve(self, x: SparseTensor, out: SparseTensor) -> Tensor:
        result = _SparseConvFunction.apply(x.feats, self.weight, self._maps(x, out),
                                           len(out.coords), self._centre)
        return result if self.bias is None else result + self.bias


class _SparseConvFunction(torch.autograd.Function):
    """Gather, matmul, and ``index_add_`` per offset, with a hand-written backward.

    The backward re-gathers from the saved input features, so autograd keeps no per-offset
    gathered copies. It also accumulates into one gradient buffer, not one zero-filled buffer
    per offset. Autocast is switched off inside and the maths runs in the features' dtype, like
    MinkowskiEngine, which has no half-precision path. Under AMP the U-Net therefore stays
    float32 (its BatchNorms emit float32), and every ``index_add_`` sees one dtype.
    """

    @staticmethod
    def forward(ctx, feats: Tensor, weight: Tensor, maps: list, n_out: int,
                centre: Optional[int]) -> Tensor:
        ctx.save_for_backward(feats, weight)
        ctx.maps, ctx.centre = maps, centre
        with torch.autocast(feats.device.type, enabled=False):
            weight = weight.to(feats.dtype)
            out = feats @ weight[centre] if centre is not None else \
                feats.new_zeros(n_out, weight.shape[2])
            for k, in_idx, out_idx in maps:
                out.index_add_(0, out_idx, feats.index_select(0, in_idx) @ weight[k])
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple:
        feats, weight = ctx.saved_tensors
        centre, grad_feats, grad_weight = ctx.centre, None, None
        grad_out = grad_out.to(feats.dtype)
        cast = weight.to(feats.dtype)
        if ctx.needs_input_grad[0]:
            grad_feats = grad_out @ cast[centre].T if centre is not None else \
                torch.zeros_like(feats)
            for k, in_idx, out_idx in ctx.maps:
                grad_feats.index_add_(0, in_idx, grad_out.index_select(0, out_idx) @ cast[k].T)
        if ctx.needs_input_grad[1]:
            grad_weight = torch.zeros_like(cast)
            if centre is not None:
                torch.mm(feats.T, grad_out, out=grad_weight[centre])
            for k, in_idx, out_idx in ctx.maps:
                torch.mm(feats.index_select(0, in_idx).T, grad_out.index_select(0, out_idx),
                         out=grad_weight[k])
            grad_weight = grad_weight.to(weight.dtype)
        return grad_feats, grad_weight, None, None, None


class SparseConv3d(_SparseConvBase):
    """Sparse 3D convolution on a :class:`SparseTensor`.

    stride 1 is submanifold: the output lives on the input coordinates. stride s > 1 outputs on
    ``unique(floor(coords / s))`` at tensor stride ``x.stride * s``. Weight (k³, C_in, C_out).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                 stride: int = 1, dilation: int = 1, bias: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias)

    def forward(self, x: SparseTensor) -> SparseTensor:
        out = x
        if self.stride != 1:
            coords, keys = _downsampled(x, self.stride)
            out = SparseTensor(coords, x.feats, x.stride * self.stride, keys, x.cache)
        return out.replace(self._convolve(x, out))


class SparseConvTranspose3d(_SparseConvBase):
    """Transposed sparse convolution (upsampling) onto a known finer coordinate set.

    ``forward(x, target)`` returns features on ``target``'s coordinates, where
    ``target.stride * stride == x.stride`` (typically the U-Net skip tensor). With kernel 2 and
    stride 2 each fine cell receives exactly its parent cell's features times the weight of
    its octant.
    """

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 2,
                 stride: int = 2, dilation: int = 1, bias: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias)

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        if target.stride * self.stride != x.stride:
            raise ValueError(f'target stride {target.stride} * {self.stride} != {x.stride}')
        out = SparseTensor(target.coords, x.feats, target.stride, target.keys, x.cache)
        return out.replace(self._convolve(x, out))


class SparseBatchNorm(nn.BatchNorm1d):
    """BatchNorm1d over the (N, C) features of a :class:`SparseTensor`."""

    def forward(self, x: SparseTensor) -> SparseTensor:
        return x.replace(super().forward(x.feats))


class SparseReLU(nn.Module):
    """ReLU on the features of a :class:`SparseTensor`."""

    def forward(self, x: SparseTensor) -> SparseTensor:
        return x.replace(F.relu(x.feats))
