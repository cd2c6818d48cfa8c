"""Sparse voxel convolution in pure PyTorch, in the manner of MinkowskiEngine (no compiled ops).

Coordinates and the tensor: :mod:`.sparse_tensor` (``SparseTensor``, the coordinate hash,
:func:`~.sparse_tensor.voxelize`).

Kernel maps. A convolution pairs input row ``p`` with output row ``q`` through kernel offset ``o``
when ``p = stride * q + dilation * o``; a transposed convolution when
``q = stride * p + dilation * o``. Offsets run over ``-((k - 1) // 2) .. k - 1 - (k - 1) // 2`` on
each axis: centred for odd k (``F.conv3d`` with ``padding=(k - 1) // 2``), ``{0, 1}`` for k = 2.
With kernel 2 and stride 2 every input cell therefore feeds exactly the coarser cell containing
it, as in MinkowskiEngine's downsampling. Maps are cached in ``SparseTensor.cache``, a dict shared
by every tensor derived from one :func:`voxelize` call, so a U-Net builds each map once per
forward.

Chunked im2col. A kernel map is an (N_out, K) neighbour table: per output row, the input row
it meets through each of the K = k³ offsets, or a zero row. A convolution gathers the
(N_out, K * C_in) neighbourhood matrix (im2col) and multiplies it by the (K * C_in, C_out)
weight, a fixed number of kernel launches whatever the kernel size; absent neighbours cost
arithmetic on zeros, not launches. The whole matrix would be large (26 325 rows x 27 x 224
channels: 637 MB for one convolution of GSNet's at paper size, twice that in its backward), so
it is gathered and multiplied in chunks of output rows of at most ``IM2COL_CHUNK_ELEMENTS``
elements (256 MiB in float32): two launches a chunk, and only the level-0 convolutions of
the widest layers need more than one chunk (the launch table in
docs/notes/benchmarks/gpu_cost.md).

Algorithms. That trade suits a GPU, where launches are what costs; on the CPU a launch costs
little and the zeros do: at the paper's occupancy (37 % of the 27 neighbours present) the
im2col product does 2.7x the arithmetic. The layers' ``algorithm`` (the U-Net's
``conv_algorithm``, a model config key: :mod:`.numerics`) therefore chooses how the torch
backend convolves:
``chunked_im2col``, ``pairs`` (per kernel offset, one product of only the present (input,
output) pairs, summed offset by offset: K launches and one host sync per kernel map) or
``auto`` (the default: ``chunked_im2col`` on CUDA, ``pairs`` on the CPU). Both use the same
kernel map and parameters and agree to float rounding (tested); each is deterministic. The
launch counter's ``cuda_path`` sets ``chunked_im2col``.

Determinism. No step adds into shared addresses at once: the chunked im2col's forward and
both backward products are matmuls (the weight gradient summed chunk after chunk, in row
order), and its input gradient gathers through the inverse table (a scatter whose writes
never collide); the pairs algorithm adds one offset at a time, and
within an offset no row occurs twice. Results are bit-reproducible on the CPU (tested) and, by construction, on
CUDA (``voxelize``'s exception: :mod:`.sparse_tensor`).

Backends. Every conv layer takes ``backend='torch'`` (this module's algorithms: the
reference, and the CPU default) or ``backend='spconv'`` (spconv 2.3's kernels, the GPU backend;
see :mod:`.spconv_backend`). Both keep the same parameters, so one state_dict serves both.

Host syncs. Kernel maps are built on the device (the coordinate sets: :mod:`.sparse_tensor`).
"""
import math
from typing import Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from . import spconv_backend
from .numerics import check_choice, resolve_conv_algorithm
from .sparse_tensor import KEY_BITS, MAX_OFFSET, SparseTensor, hash_coords, unhash_coords

#: The values of the conv layers' ``backend`` argument.
BACKENDS = ('torch', 'spconv')

#: Elements of one chunk of the im2col matrix (see the module docstring).
IM2COL_CHUNK_ELEMENTS = 1 << 26


def kernel_offsets(kernel_size: int, dilation: int = 1, device=None) -> Tensor:
    """(k³, 3) int64 offsets, x slowest and z fastest, matching a dense (k, k, k) kernel."""
    axis = torch.arange(kernel_size, device=device) - (kernel_size - 1) // 2
    return torch.cartesian_prod(axis, axis, axis) * dilation


_OFFSETS: dict = {}  # (kernel_size, dilation, device) -> kernel_offsets, built once


def _cached_offsets(kernel_size: int, dilation: int, device) -> Tensor:
    key = (kernel_size, dilation, device)
    if key not in _OFFSETS:
        _OFFSETS[key] = kernel_offsets(kernel_size, dilation, device)
    return _OFFSETS[key]


def _neighbour_table(in_keys: Tensor, out_coords: Tensor, offsets: Tensor, stride: int,
                     transposed: bool) -> Tensor:
    """(N_out, K) int64: the input row that output row q meets through offset k, or N_in (a
    zero row) where there is none. Built on the device, without a host sync."""
    n_in = len(in_keys)
    if n_in == 0:
        return out_coords.new_zeros(len(out_coords), len(offsets))
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
        delta = (offsets[:, 0] << (2 * KEY_BITS)) + (offsets[:, 1] << KEY_BITS) + offsets[:, 2]
        query = base[None] + delta[:, None]
    pos = torch.searchsorted(in_keys, query).clamp_(max=n_in - 1)
    hit = in_keys[pos] == query
    if valid is not None:
        hit &= valid
    return torch.where(hit, pos, n_in).T.contiguous()


def _inverse_table(table: Tensor, n_in: int) -> Tensor:
    """(N_in, K): the output row that input row p feeds through offset k, or N_out.

    Through one offset an input row feeds at most one output row, so every entry but the
    dropped "none" row N_in is written exactly once: a deterministic scatter, no atomics."""
    n_out, volume = table.shape
    inverse = table.new_full((n_in + 1, volume), n_out)
    rows = torch.arange(n_out, device=table.device)[:, None].expand(-1, volume)
    return inverse.scatter_(0, table, rows)[:n_in]


def _downsampled(x: SparseTensor, stride: int) -> tuple:
    """Coordinates and keys of ``unique(floor(coords / stride))``, shared per input set
    (:func:`voxelize` with ``levels`` computes them all at once, see there)."""
    key = ('down', id(x.coords), stride)
    if key not in x.cache:
        cells = torch.cat([x.coords[:, :1], x.coords[:, 1:].div(stride, rounding_mode='floor')], 1)
        keys = torch.unique(hash_coords(cells), sorted=True)
        x.cache[key] = (x.coords, unhash_coords(keys), keys)
    return x.cache[key][1:]


class _KernelMap:
    """The neighbour table of one (input set, output set, kernel) and, built by the first
    layer that needs them, its inverse and its per-offset pairs; shared by every layer with
    that map."""

    def __init__(self, table: Tensor, n_in: int) -> None:
        self.table, self.n_in = table, n_in
        self._inverse: Optional[Tensor] = None
        self._pairs: Optional[List[Tuple[int, Tensor, Tensor]]] = None

    @property
    def inverse(self) -> Tensor:
        if self._inverse is None:
            self._inverse = _inverse_table(self.table, self.n_in)
        return self._inverse

    @property
    def pairs(self) -> List[Tuple[int, Tensor, Tensor]]:
        """[(offset k, output rows, input rows)] of every offset with a pair: the output rows
        ascending, each at most once per offset (so is every input row)."""
        if self._pairs is None:
            present = (self.table < self.n_in).T  # (K, N_out)
            counts = present.sum(1).tolist()  # the one host sync of the map
            offset_rows = present.nonzero()[:, 1].split(counts)
            self._pairs = [(k, rows, self.table[rows, k])
                           for k, rows in enumerate(offset_rows) if len(rows)]
        return self._pairs


class _SparseConvBase(nn.Module):
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
                 dilation: int, bias: bool, backend: str, algorithm: str) -> None:
        super().__init__()
        if dilation * (kernel_size // 2 + 1) > MAX_OFFSET:
            raise ValueError('kernel_size * dilation too large for the coordinate hash')
        if backend not in BACKENDS:
            raise ValueError(f'backend must be one of {BACKENDS}, got {backend!r}')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = kernel_size, stride, dilation
        volume = kernel_size ** 3
        self.weight = nn.Parameter(torch.empty(volume, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        # MinkowskiEngine's kaiming_normal_(mode='fan_out', relu): fan_out = volume * C_out.
        nn.init.normal_(self.weight, std=math.sqrt(2.0 / (volume * out_channels)))
        # A stride-1 1³ convolution pairs every row with itself: one plain matmul.
        self._pointwise = volume == 1 and stride == 1
        self.backend, self.algorithm = backend, check_choice('conv_algorithm', algorithm)
        self._spconv = None  # the spconv module (no parameters), kept out of the module tree
        if backend == 'spconv' and not self._pointwise:
            spconv_backend.check_layer(kernel_size, stride, dilation, self.transposed)
            # A plain attribute: not a submodule, so state_dict and module lists are the
            # torch backend's.
            object.__setattr__(self, '_spconv', spconv_backend.make_module(
                in_channels, out_channels, kernel_size, stride, dilation, self.transposed))

    def extra_repr(self) -> str:
        return (f'{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, '
                f'stride={self.stride}, dilation={self.dilation}, bias={self.bias is not None}, '
                f'backend={self.backend!r}, algorithm={self.algorithm!r}')

    def _map(self, x: SparseTensor, out: SparseTensor) -> _KernelMap:
        if x.keys is None or out.keys is None:
            raise ValueError(f"{type(self).__name__}(backend='torch') got rows of a strided "
                             f"backend='spconv' layer (spconv's order, no hash keys): build "
                             f"every layer of a network with the same backend")
        key = ('map', id(x.coords), id(out.coords), self.kernel_size, self.stride,
               self.dilation, self.transposed)
        if key not in x.cache:
            offsets = _cached_offsets(self.kernel_size, self.dilation, x.coords.device)
            table = _neighbour_table(x.keys, out.coords, offsets, self.stride, self.transposed)
            # The coordinate tensors ride along so their ids stay unique while the cache lives.
            x.cache[key] = (x.coords, out.coords, _KernelMap(table, len(x.coords)))
        return x.cache[key][2]

    def _convolve(self, x: SparseTensor, out: SparseTensor) -> Tensor:
        if self._pointwise:
            with torch.autocast(x.feats.device.type, enabled=False):
                result = x.feats @ self.weight[0].to(x.feats.dtype)
        else:
            result = _SparseConvFunction.apply(x.feats, self.weight, self._map(x, out),
                                               self.algorithm)
        return result if self.bias is None else result + self.bias


def _chunk_rows(width: int) -> int:
    """Rows of an im2col chunk of ``width`` columns (see ``IM2COL_CHUNK_ELEMENTS``)."""
    return max(1, IM2COL_CHUNK_ELEMENTS // max(1, width))


def _im2col_chunks(feats: Tensor, table: Tensor) -> Iterator[Tuple[slice, Tensor]]:
    """(rows, matrix) for consecutive chunks of output rows: row q of ``matrix`` holds
    ``feats[table[q, k]]`` for every k, zeros where the table says "none" (index
    ``len(feats)``). Only one chunk is alive at a time."""
    padded = F.pad(feats, (0, 0, 0, 1))
    step = _chunk_rows(table.shape[1] * feats.shape[1])
    for lo in range(0, len(table), step):
        rows = slice(lo, min(lo + step, len(table)))
        part = table[rows]
        yield rows, padded.index_select(0, part.reshape(-1)).view(len(part), -1)


def _im2col_product(feats: Tensor, table: Tensor, weight: Tensor) -> Tensor:
    """(N, K * C) im2col matrix of ``feats`` through ``table`` times ``weight`` (K * C, C_out),
    chunk by chunk of rows, each chunk's product written into its rows of the result."""
    out = feats.new_empty(len(table), weight.shape[1])
    for rows, matrix in _im2col_chunks(feats, table):
        torch.mm(matrix, weight, out=out[rows])
    return out


def _im2col_weight_grad(feats: Tensor, table: Tensor, grad_out: Tensor) -> Tensor:
    """(K * C, C_out): the im2col matrix transposed times ``grad_out``, summed over the chunks
    in row order (deterministic)."""
    grad = None
    for rows, matrix in _im2col_chunks(feats, table):
        if grad is None:
            grad = matrix.T @ grad_out[rows]
        else:
            grad.addmm_(matrix.T, grad_out[rows])
    if grad is None:  # no output rows
        grad = feats.new_zeros(table.shape[1] * feats.shape[1], grad_out.shape[1])
    return grad


class _SparseConvFunction(torch.autograd.Function):
    """The torch backend's convolution (``algorithm``: chunked im2col or pairs, see the module
    docstring), with a hand-written backward of the same shape.

    Chunked im2col backward: the input gradient gathers the output gradient through the
    inverse table and multiplies by the transposed weight, so every input row's sum is one
    matmul row: no scatter, no atomics, deterministic on any device. The weight gradient
    re-gathers the input chunk by chunk (autograd keeps no (N, K * C) copy). Autocast is
    switched off inside and the maths runs in the features' dtype, like MinkowskiEngine, which
    has no half-precision path; under AMP the U-Net therefore stays float32 (its BatchNorms
    emit float32).
    """

    @staticmethod
    def forward(ctx, feats: Tensor, weight: Tensor, kernel_map: _KernelMap,
                algorithm: str) -> Tensor:
        ctx.save_for_backward(feats, weight)
        ctx.kernel_map, ctx.weight_dtype = kernel_map, weight.dtype
        ctx.algorithm = resolve_conv_algorithm(algorithm, feats.device)
        with torch.autocast(feats.device.type, enabled=False):
            weight = weight.to(feats.dtype)
            if ctx.algorithm == 'pairs':
                out = feats.new_zeros(len(kernel_map.table), weight.shape[2])
                for k, rows_out, rows_in in kernel_map.pairs:
                    out.index_add_(0, rows_out, feats[rows_in] @ weight[k])
                return out
            return _im2col_product(feats, kernel_map.table, weight.reshape(-1, weight.shape[2]))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple:
        feats, weight = ctx.saved_tensors
        kernel_map, grad_feats, grad_weight = ctx.kernel_map, None, None
        grad_out = grad_out.to(feats.dtype)
        cast = weight.to(feats.dtype)
        if ctx.algorithm == 'pairs':
            return _pairs_backward(ctx, feats, cast, grad_out, kernel_map) + (None, None)
        if ctx.needs_input_grad[0]:
            grad_feats = _im2col_product(grad_out, kernel_map.inverse,
                                         cast.transpose(1, 2).reshape(-1, cast.shape[1]))
        if ctx.needs_input_grad[1]:
            grad_weight = _im2col_weight_grad(feats, kernel_map.table, grad_out)
            grad_weight = grad_weight.view_as(cast).to(weight.dtype)
        return grad_feats, grad_weight, None, None


def _pairs_backward(ctx, feats: Tensor, weight: Tensor, grad_out: Tensor,
                    kernel_map: _KernelMap) -> tuple:
    """Gradients of the ``pairs`` forward: per offset, the input rows' share of the output
    gradient (summed offset by offset) and that offset's weight gradient."""
    grad_feats = feats.new_zeros(feats.shape) if ctx.needs_input_grad[0] else None
    grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
    for k, rows_out, rows_in in kernel_map.pairs:
        grad_rows = grad_out[rows_out]
        if grad_feats is not None:
            grad_feats.index_add_(0, rows_in, grad_rows @ weight[k].T)
        if grad_weight is not None:
            grad_weight[k] = feats[rows_in].T @ grad_rows
    if grad_weight is not None:
        grad_weight = grad_weight.to(ctx.weight_dtype)
    return grad_feats, grad_weight


class SparseConv3d(_SparseConvBase):
    """Sparse 3D convolution on a :class:`SparseTensor`.

    stride 1 is submanifold: the output lives on the input coordinates. stride s > 1 outputs on
    ``unique(floor(coords / s))`` at tensor stride ``x.stride * s``. Weight (k³, C_in, C_out).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3,
                 stride: int = 1, dilation: int = 1, bias: bool = False,
                 backend: str = 'torch', algorithm: str = 'auto') -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias, backend,
                         algorithm)

    def forward(self, x: SparseTensor) -> SparseTensor:
        if self._spconv is not None:
            out = spconv_backend.convolve(self, x)
            return out if self.bias is None else out.replace(out.feats + self.bias)
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
                 stride: int = 2, dilation: int = 1, bias: bool = False,
                 backend: str = 'torch', algorithm: str = 'auto') -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias, backend,
                         algorithm)

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        if target.stride * self.stride != x.stride:
            raise ValueError(f'target stride {target.stride} * {self.stride} != {x.stride}')
        if self._spconv is not None:
            out = spconv_backend.convolve(self, x, target)
            return out if self.bias is None else out.replace(out.feats + self.bias)
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
