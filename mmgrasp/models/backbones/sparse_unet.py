"""MinkUNet14-style sparse voxel U-Net (GSNet's backbone) on the sparse conv layers (torch or
spconv backend)."""
from typing import Optional, Sequence

from mmengine.logging import print_log
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmgrasp.registry import MODELS
from ..layers.sparse_conv import (SparseBatchNorm, SparseConv3d, SparseConvTranspose3d,
                                  SparseReLU, SparseTensor, check_algorithm, sparse_cat,
                                  voxelize)

#: The values of ``voxel_reduce`` (those of :func:`voxelize`'s ``reduce``).
VOXEL_REDUCTIONS = ('mean', 'first')


class SparseBasicBlock(nn.Module):
    """ResNet basic block (two 3³ submanifold convs). When the width changes, a 1³ conv + BN
    projects the shortcut, as in MinkowskiEngine's ``BasicBlock`` with ``_make_layer``."""

    def __init__(self, in_channels: int, channels: int, backend: str = 'torch',
                 algorithm: str = 'auto') -> None:
        super().__init__()
        conv = dict(backend=backend, algorithm=algorithm)
        self.conv1 = SparseConv3d(in_channels, channels, 3, **conv)
        self.norm1 = SparseBatchNorm(channels)
        self.conv2 = SparseConv3d(channels, channels, 3, **conv)
        self.norm2 = SparseBatchNorm(channels)
        self.relu = SparseReLU()
        self.downsample = None if in_channels == channels else nn.Sequential(
            SparseConv3d(in_channels, channels, 1, **conv), SparseBatchNorm(channels))

    def forward(self, x: SparseTensor) -> SparseTensor:
        out = self.norm2(self.conv2(self.relu(self.norm1(self.conv1(x)))))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(out.replace(out.feats + shortcut.feats))


def _blocks(in_channels: int, channels: int, num: int, conv: dict) -> nn.Sequential:
    return nn.Sequential(*[SparseBasicBlock(in_channels if i == 0 else channels, channels,
                                            **conv) for i in range(num)])


@MODELS.register_module()
class SparseUNet14(BaseModule):
    """Sparse residual U-Net with MinkUNet14's layout, giving per-point features.

    Stem: 5³ conv to ``channels[0]`` at stride 1. Encoder, four times: 2³ stride-2 conv, then
    basic blocks to ``channels[i]`` (strides 2, 4, 8, 16). Decoder, four times: 2³ transposed
    conv to ``channels[4 + i]``, concatenation with the encoder tensor of that stride (the stem
    output last), then basic blocks. Head: 1³ conv with bias to ``out_channels``. The stem,
    strided and transposed convs are each followed by BN + ReLU.

    The default ``channels`` are MinkUNet14's. GSNet's ``MinkUNet14D`` uses
    (32, 64, 128, 256, 192, 192, 192, 192); MinkowskiEngine's own 14D has 384 in the decoder
    stages instead of 192. MinkowskiEngine fixes the stem width at INIT_DIM = 32; here it is
    ``stem_channels``, by default ``channels[0]``, which equals 32 in every MinkUNet14 variant
    and lets small configs shrink the stem too.

    Args:
        in_channels: per-point input feature width (GSNet feeds ones, 3 channels).
        out_channels: per-point output width.
        voxel_size: voxel edge in metres.
        channels: 8 widths: 4 encoder stages, then 4 decoder stages.
        layers: basic blocks per stage, 8 entries.
        stem_channels: width of the stem (ME's INIT_DIM), the first down conv and the last
            skip; None: ``channels[0]``.
        voxel_reduce: features of a voxel from its points': 'mean' (the average) or 'first'
            (the lowest-index point's, as MinkowskiEngine's ``sparse_quantize`` keeps them:
            FineGrasp's xyz + normal input). GSNet and EconomicGrasp feed ones, where both
            agree.
        backend: 'torch' (pure PyTorch: the reference, runs anywhere) or
            'spconv' (spconv 2.3.x kernels: the GPU backend; its CPU wheel runs forward
            passes only). Same parameters, same state_dict; see ``layers/spconv_backend.py``.
        conv_algorithm: how the torch backend convolves: 'chunked_im2col', 'pairs' or 'auto'
            (chunked im2col on CUDA, pairs on the CPU); see ``layers/sparse_conv.py``. A
            config key, so it is in the hashed config; logged when the U-Net is built.
    """

    def __init__(self, in_channels: int = 3, out_channels: int = 512, voxel_size: float = 0.005,
                 channels: Sequence[int] = (32, 64, 128, 256, 256, 128, 96, 96),
                 layers: Sequence[int] = (1, 1, 1, 1, 1, 1, 1, 1), backend: str = 'torch',
                 conv_algorithm: str = 'auto', stem_channels: Optional[int] = None,
                 voxel_reduce: str = 'mean', init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg)
        if len(channels) != 8 or len(layers) != 8:
            raise ValueError('channels and layers need 8 entries each')
        if voxel_reduce not in VOXEL_REDUCTIONS:
            raise ValueError(f'voxel_reduce={voxel_reduce!r}: expected one of {VOXEL_REDUCTIONS}')
        self.in_channels, self.out_channels, self.voxel_size = in_channels, out_channels, voxel_size
        self.voxel_reduce = voxel_reduce
        stem = channels[0] if stem_channels is None else stem_channels
        self.backend, self.conv_algorithm = backend, check_algorithm(conv_algorithm)
        conv = dict(backend=backend, algorithm=conv_algorithm)
        print_log(f'{type(self).__name__}: backend={backend!r}, '
                  f'conv_algorithm={conv_algorithm!r}'
                  + (" (chunked_im2col on CUDA, pairs on the CPU)"
                     if conv_algorithm == 'auto' and backend == 'torch' else ''),
                  logger='current')
        self.stem = nn.Sequential(SparseConv3d(in_channels, stem, 5, **conv),
                                  SparseBatchNorm(stem), SparseReLU())
        self.down = nn.ModuleList()
        width = stem
        for i in range(4):
            self.down.append(nn.Sequential(
                SparseConv3d(width, width, 2, stride=2, **conv),
                SparseBatchNorm(width), SparseReLU(),
                _blocks(width, channels[i], layers[i], conv)))
            width = channels[i]
        skips = [channels[2], channels[1], channels[0], stem]
        self.up_convs = nn.ModuleList()
        self.up_norms = nn.ModuleList()
        self.up_blocks = nn.ModuleList()
        for i in range(4):
            planes = channels[4 + i]
            self.up_convs.append(SparseConvTranspose3d(width, planes, 2, stride=2, **conv))
            self.up_norms.append(nn.Sequential(SparseBatchNorm(planes), SparseReLU()))
            self.up_blocks.append(_blocks(planes + skips[i], planes, layers[4 + i], conv))
            width = planes
        self.head = SparseConv3d(width, out_channels, 1, bias=True, **conv)

    def forward_sparse(self, x: SparseTensor) -> SparseTensor:
        """Stride-1 sparse tensor -> per-voxel features on the same coordinates."""
        out = self.stem(x)
        encoder = [out]
        for stage in self.down:
            out = stage(out)
            encoder.append(out)
        for conv, norm, blocks, skip in zip(self.up_convs, self.up_norms, self.up_blocks,
                                            reversed(encoder[:-1])):
            out = blocks(sparse_cat(norm(conv(out, skip)), skip))
        return self.head(out)

    def forward(self, points: Tensor, feats: Optional[Tensor] = None) -> Tensor:
        """points (B, N, 3) metres, feats (B, N, in_channels) or None for ones (GSNet's input)
        -> per-point features (B, out_channels, N), each point taking its voxel's features.

        Several points share a voxel, so the backward of that last gather sums colliding
        gradients. It is deterministic on the CPU. On CUDA it is bit-reproducible only under
        ``torch.use_deterministic_algorithms(True)``, as is the mean of ``feats`` per voxel.
        """
        batch, num, _ = points.shape
        if feats is None:
            feats = points.new_ones(batch, num, self.in_channels)
        elif feats.shape != (batch, num, self.in_channels):
            raise ValueError(f'{type(self).__name__}: feats {tuple(feats.shape)} for points '
                             f'{tuple(points.shape)}, expected (B, N, in_channels='
                             f'{self.in_channels})')
        x, point_to_voxel = voxelize(points, self.voxel_size, feats, reduce=self.voxel_reduce,
                                     levels=len(self.down))
        voxel_feats = self.forward_sparse(x).feats.index_select(0, point_to_voxel)
        return voxel_feats.view(batch, num, -1).transpose(1, 2).contiguous()
