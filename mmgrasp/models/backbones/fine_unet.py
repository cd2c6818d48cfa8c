"""FineGrasp's backbone: the MinkowskiEngine ``MinkUNet`` of RoboOrchardLab's
``robo_orchard_lab/models/finegrasp/backbone/minkunet.py`` (Pointcept's MinkUNet) on mmgrasp's
sparse conv layers."""
from typing import Optional, Sequence

from mmgrasp.registry import MODELS
from .sparse_unet import SparseUNet14

#: ``MinkUNet.PLANES`` (4 encoder, then 4 decoder stages).
FINEGRASP_PLANES = (32, 64, 128, 256, 192, 192, 192, 192)
#: ``MinkUNet.LAYERS``: one ME ``BasicBlock`` per stage.
FINEGRASP_LAYERS = (1, 1, 1, 1, 1, 1, 1, 1)
#: ``MinkUNet.INIT_DIM``: the stem width.
FINEGRASP_INIT_DIM = 32


@MODELS.register_module()
class FineGraspUNet(SparseUNet14):
    """FineGrasp's ``MinkUNet`` with the reference's defaults; same layers as
    :class:`SparseUNet14`, so the same forward (points, feats) -> (B, out_channels, N).

    The reference class: stem ``conv0p1s1`` (5³, ``INIT_DIM`` = 32) + BN + ReLU; four times a
    2³ stride-2 conv + BN + ReLU and ``LAYERS[i]`` basic blocks to ``PLANES[i]``; four times a
    2³ stride-2 transposed conv to ``PLANES[4 + i]`` + BN + ReLU, ``ME.cat`` with the encoder
    tensor of that stride (the stem output last) and ``LAYERS[4 + i]`` blocks; a 1³ conv with
    bias to ``out_channels`` (``seed_feat_dim`` = 512). The layers' state-dict names are
    SparseUNet14's; ``tools/model_converters/reference_to_mmgrasp.py finegrasp`` maps the
    reference's (``backbone.conv0p1s1.kernel`` ...) onto them.

    What differs from GSNet's use of the same network, both from ``FineGrasp.forward``:

    - input: ``in_channels`` 6, the points' xyz in metres and their normals
      (``use_normal=True``, the GraspNet-1Billion config), or 3 channels of ones
      (``use_normal=False``: ``in_channels=3`` and ``feats=None``);
    - voxel features: ``ME.utils.sparse_quantize`` (on the CPU tensors, before ``.cuda()``)
      keeps the features of each voxel's first point, no averaging (``insert_and_map`` of ME's
      ``coordinate_map_cpu.hpp`` inserts row by row, the first insert of a cell wins), hence
      ``voxel_reduce='first'``.

    Args:
        in_channels: 6 (xyz + normal) or 3 (ones).
        channels, layers, stem_channels: the class's ``PLANES``, ``LAYERS`` and ``INIT_DIM``
            (Pointcept's other MinkUNets differ only in these, e.g. MinkUNet18's LAYERS
            (2, 2, 2, 2, 2, 2, 2, 2)); the defaults are FineGrasp's.
        out_channels, voxel_size, backend, conv_algorithm, voxel_reduce, init_cfg: as in
            :class:`SparseUNet14`.
    """

    def __init__(self, in_channels: int = 6, out_channels: int = 512, voxel_size: float = 0.005,
                 channels: Sequence[int] = FINEGRASP_PLANES,
                 layers: Sequence[int] = FINEGRASP_LAYERS, backend: str = 'torch',
                 conv_algorithm: str = 'auto', stem_channels: Optional[int] = FINEGRASP_INIT_DIM,
                 voxel_reduce: str = 'first', init_cfg: Optional[dict] = None) -> None:
        super().__init__(in_channels=in_channels, out_channels=out_channels,
                         voxel_size=voxel_size, channels=channels, layers=layers,
                         backend=backend, conv_algorithm=conv_algorithm,
                         stem_channels=stem_channels, voxel_reduce=voxel_reduce,
                         init_cfg=init_cfg)
