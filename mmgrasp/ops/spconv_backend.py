"""spconv 2.3 as the GPU backend of :mod:`.sparse_conv` (``backend='spconv'``).

The layers keep the torch backend's parameters, (k³, C_in, C_out) with x slowest and z fastest,
so one state_dict (and every converted GSNet checkpoint) serves both backends: at each call
the weight is permuted to spconv 2.x's KRSC layout ``(C_out, k_x, k_y, k_z, C_in)`` (a view
and one copy, differentiable). spconv's indices are ``(batch, x, y, z)`` in that order, so
kernel offset ``(i, j, l)`` of spconv is offset ``(i, j, l) - (k - 1) // 2`` of
:func:`.sparse_conv.kernel_offsets` for a submanifold conv and ``(i, j, l)`` for a strided one,
as ``tests/unit/models/test_sparse_unet_spconv.py`` checks with asymmetric kernels.

What maps to what (only where both backends compute the same function):

- stride 1, odd k: ``SubMConv3d`` (output on the input rows). Layers with the same kernel on
  the same rows share one map through an ``indice_key`` naming those rows.
- stride s = k, dilation 1: ``SparseConv3d(k, stride=s)``; every input cell feeds exactly
  ``floor(p / s)``, the torch backend's output set, in spconv's own row order.
- transposed, stride s = k: ``SparseInverseConv3d``, which replays the strided conv that made
  its input from ``target`` (found by the key naming ``target``'s rows), so its output rows
  are ``target``'s. An input that no strided conv of ``target`` produced is refused.
- 1³ stride 1: the torch backend's matmul (spconv runs this case as ``torch.mm`` too).

Coordinates. spconv needs indices in ``[0, spatial_shape)``: the first spconv layer shifts the
rows by an origin that is a multiple of :data:`ALIGN` cells (so ``floor`` by any stride up to
it commutes with the shift) and rounds the spatial shape up to a multiple of it. The glue reads
the host once per forward: the coordinate bounds, as one list of Python ints from which the
origin, the spatial shape and the batch size come; the layers below check and divide that
origin as Python ints (spconv's own indice generation reads the host too, inside spconv).
Strided outputs get their coordinates back
(``SparseTensor.coords``) but are in spconv's row order, so they carry no hash keys and a torch
backend layer refuses them.

CPU. spconv's CPU wheel runs forward passes only (its backward calls CUDA; a backward through
it is refused here by name). In spconv 2.3.8 its CPU gather / scatter-add is not thread safe:
with more than one OpenMP thread a few output rows come out wrong, differently each run. Each
CPU call therefore runs on one thread.
"""
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import Tensor

from .sparse_tensor import SparseTensor, SpconvState

#: Origin alignment in cells of the first spconv layer's stride: strided spconv layers below it
#: may reach a total stride of ALIGN (GSNet's U-Net reaches 16).
ALIGN = 256
PIP_HINT = ("on a GPU machine pip install spconv-cu126 (or spconv-cu124, -cu121, -cu118: the "
            "wheel of your CUDA, spconv 2.3.8), on the CPU pip install spconv (forward only)")


def import_spconv():
    """``spconv.pytorch``, or an ImportError that names the wheel to install."""
    try:
        import spconv.pytorch as spconv
    except ImportError as err:
        raise ImportError(f"backend='spconv' needs spconv 2.3.x, which does not import "
                          f"({err}): {PIP_HINT}; or use backend='torch'") from err
    return spconv


def check_layer(kernel_size: int, stride: int, dilation: int, transposed: bool) -> None:
    """Refuse, at construction, layers whose spconv function differs from the torch one."""
    if stride == 1 and not transposed:
        if kernel_size % 2 == 0:
            raise ValueError(f"backend='spconv': a stride-1 conv needs an odd kernel_size, got "
                             f"{kernel_size} (spconv centres even submanifold kernels "
                             f"differently from offsets 0..k-1)")
    elif kernel_size != stride or dilation != 1:
        kind = 'transposed' if transposed else 'strided'
        raise ValueError(f"backend='spconv': a {kind} conv needs kernel_size == stride and "
                         f"dilation 1, got kernel_size={kernel_size}, stride={stride}, "
                         f"dilation={dilation}")


def make_module(in_channels: int, out_channels: int, kernel_size: int, stride: int,
                dilation: int, transposed: bool):
    """The spconv module that computes a layer, without parameters of its own (the layer's
    weight is passed at each call, see :func:`convolve`)."""
    spconv = import_spconv()
    # spconv initialises a weight of its own (then dropped): not from the seeded stream, so a
    # seed gives both backends the same weights.
    with torch.random.fork_rng(devices=[]):
        return _module(spconv, in_channels, out_channels, kernel_size, stride, dilation,
                       transposed)


def _module(spconv, in_channels: int, out_channels: int, kernel_size: int, stride: int,
            dilation: int, transposed: bool):
    if transposed:
        module = spconv.SparseInverseConv3d(in_channels, out_channels, kernel_size,
                                            indice_key='', bias=False)
    elif stride == 1:
        # large_kernel_fast_algo: implicit GEMM up to 125 offsets (the 5³ stem), not gather-
        # scatter per offset (spconv's default above 32).
        module = spconv.SubMConv3d(in_channels, out_channels, kernel_size, dilation=dilation,
                                   bias=False, large_kernel_fast_algo=True)
    else:
        module = spconv.SparseConv3d(in_channels, out_channels, kernel_size, stride=stride,
                                     bias=False)
    del module.weight
    return module


def krsc_weight(weight: Tensor) -> Tensor:
    """(k³, C_in, C_out), x slowest and z fastest -> spconv's (C_out, k_x, k_y, k_z, C_in)."""
    volume, c_in, c_out = weight.shape
    k = round(volume ** (1 / 3))
    return weight.view(k, k, k, c_in, c_out).permute(4, 0, 1, 2, 3).contiguous()


def _root(x) -> SpconvState:
    """The spconv tensor of ``x``'s rows: carried along, cached for its coordinate set, or
    built (the forward's one host read: the bounds of the coordinates)."""
    if x.spconv is not None:
        return x.spconv
    key = ('spconv', id(x.coords))
    if key not in x.cache:
        if x.keys is None:
            raise ValueError('a SparseTensor without hash keys and spconv rows')
        if len(x.coords) == 0:
            raise ValueError("backend='spconv' needs at least one voxel")
        spconv = import_spconv()
        cells = x.coords[:, 1:]
        low = cells.amin(0)
        bounds = torch.cat([low, cells.amax(0), x.coords[:, :1].amax(0)]).tolist()
        origin = tuple(lo // ALIGN * ALIGN for lo in bounds[:3])
        shape = [-(-(hi - o + 1) // ALIGN) * ALIGN for hi, o in zip(bounds[3:6], origin)]
        origin_cells = low.div(ALIGN, rounding_mode='floor') * ALIGN
        indices = torch.cat([x.coords[:, :1], cells - origin_cells], 1).int()
        tensor = spconv.SparseConvTensor(x.feats, indices, shape, bounds[6] + 1)
        x.cache[key] = (x.coords, SpconvState(tensor, origin, origin_cells))
    return x.cache[key][1]


@contextmanager
def _one_thread_on_cpu(device: torch.device) -> Iterator[None]:
    """spconv 2.3.8's CPU gather / scatter-add races with several threads (module docstring)."""
    if device.type != 'cpu':
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _no_cpu_backward(grad: Tensor) -> Tensor:
    """Runs before spconv's own CPU backward, which fails with 'Torch not compiled with CUDA'."""
    raise RuntimeError("backend='spconv' runs forward passes only on the CPU (spconv's backward "
                       "needs CUDA): train on a GPU (spconv-cu12x) or with backend='torch', or "
                       "run the forward under torch.no_grad()")


def _key(kind: str, state: SpconvState, *geometry: int) -> str:
    # The indices tensor lives in the IndiceData the key names, so its id stays unique.
    return f'mmgrasp.{kind}.{id(state.tensor.indices)}.' + '.'.join(map(str, geometry))


def convolve(layer, x, target=None):
    """``layer`` (a :class:`.sparse_conv._SparseConvBase` built with ``backend='spconv'``)
    applied to ``x`` (onto ``target`` for a transposed conv) by spconv; a SparseTensor."""
    state = _root(x)
    module, k, stride = layer._spconv, layer.kernel_size, layer.stride
    if layer.transposed:
        fine = _root(target)
        key = _key('down', fine, k, stride)
        pairs = state.tensor.indice_dict.get(key)
        if pairs is None or pairs.out_indices is not state.tensor.indices:
            raise ValueError(
                f"backend='spconv': a transposed conv (spconv's SparseInverseConv3d) inverts "
                f"the strided conv (kernel {k}, stride {stride}) that made its input from "
                f"target; this input does not come from such a conv of target")
    elif stride == 1:
        key = _key('subm', state, k, layer.dilation)
    else:
        if any(o % stride for o in state.origin):
            raise ValueError(f"backend='spconv': strided convs beyond a total stride of {ALIGN} "
                             f"from the first spconv layer")
        key = _key('down', state, k, stride)
        if key in state.tensor.indice_dict:
            key = None  # a second equal strided conv of these rows: a map of its own
    module.indice_key = key
    weight = krsc_weight(layer.weight.to(x.feats.dtype))
    device = x.feats.device
    with torch.autocast(device.type, enabled=False), _one_thread_on_cpu(device):
        out = module._conv_forward(layer.training, state.tensor.replace_feature(x.feats),
                                   weight, None)
    if device.type == 'cpu' and out.features.requires_grad:
        out.features.register_hook(_no_cpu_backward)
    if layer.transposed:
        return SparseTensor(target.coords, out.features, target.stride, target.keys, x.cache,
                            SpconvState(out, fine.origin, fine.origin_cells))
    if stride == 1:
        # The same rows: keep their indices object, which the keys name (spconv may return a
        # copy for a submanifold conv).
        out.indices = state.tensor.indices
        return SparseTensor(x.coords, out.features, x.stride, x.keys, x.cache,
                            SpconvState(out, state.origin, state.origin_cells))
    strided = state.strided(out, stride)
    indices = out.indices.long()
    coords = torch.cat([indices[:, :1], indices[:, 1:] + strided.origin_cells], 1)
    return SparseTensor(coords, out.features, x.stride * stride, None, x.cache, strided)
