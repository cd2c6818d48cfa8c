"""FineGrasp's multi-scale crop (HorizonRobotics/RoboOrchardLab
``robo_orchard_lab/models/finegrasp/finegrasp.py`` and ``head/head.py`` @241bbc6): four
EconomicGrasp cylinder groups of radii 0.07 × (0.25, 0.5, 0.75, 1.0) around each seed, fused by
a 2-layer transformer encoder over the four groups and softmax weights.

The reference's ``CylinderGroup`` is EconomicGrasp's ``Cylinder_Grouping_Global_Interaction``
line for line (MLP, one-head attention among the 16 grouped points, MLP, max pooling), so each
group is an :class:`~.economic_heads.InteractiveCylinderCrop`; its ``LocalInteraction`` is
EconomicGrasp's grasp head (:class:`~.economic_heads.InteractiveGraspHead`) and its
``GraspableNet``/``ApproachNet`` are GSNet's heads. What FineGrasp adds is here.
"""
import math
from typing import Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from ..layers.point_ops import cylinder_queries, group_points
from .economic_heads import InteractiveCylinderCrop, dropout


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` (packed ``in_proj_weight``/``in_proj_bias``, ``out_proj``: the
    same parameter names and layout, so a reference state dict loads as is) whose dropout on
    the attention weights draws from the batch's generator instead of the global RNG.

    Args:
        dim: token width; num_heads: heads (dim must be a multiple); attention_dropout: p.
    """

    def __init__(self, dim: int, num_heads: int, attention_dropout: float = 0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'SelfAttention: dim {dim} is not a multiple of num_heads '
                             f'{num_heads}')
        self.num_heads, self.attention_dropout = num_heads, attention_dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)  # nn.MultiheadAttention's init
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, tokens: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """(T, L, dim) -> (T, L, dim): every one of the T sequences attends within itself."""
        T, L, dim = tokens.shape
        qkv = F.linear(tokens, self.in_proj_weight, self.in_proj_bias)
        q, k, v = qkv.view(T, L, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        weights = dropout(weights, self.attention_dropout, generator)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(T, L, dim))


class TransformerEncoderLayer(nn.Module):
    """``nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward)`` with its defaults
    (post-norm, ReLU, dropout 0.1 at its four places, LayerNorm eps 1e-5) and its parameter
    names; the dropout masks come from the batch's generator (identity when it is None)."""

    def __init__(self, dim: int, num_heads: int, feedforward: int, dropout_p: float = 0.1):
        super().__init__()
        self.dropout_p = dropout_p
        self.self_attn = SelfAttention(dim, num_heads, dropout_p)
        self.linear1 = nn.Linear(dim, feedforward)
        self.linear2 = nn.Linear(feedforward, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        p = self.dropout_p
        x = self.norm1(x + dropout(self.self_attn(x, generator), p, generator))
        hidden = dropout(F.relu(self.linear1(x)), p, generator)
        return self.norm2(x + dropout(self.linear2(hidden), p, generator))


class GroupTransformerFusion(nn.Module):
    """The reference's ``GroupTransformerFusion``: per seed, the G group features are a
    sequence of G tokens through a transformer encoder; a linear layer scores each output
    token and the softmax over the G tokens weighs their sum.

    Args:
        dim: feature width (256); num_layers: encoder layers (2); num_heads: 8;
        feedforward: hidden width of the feed-forward (1024 = 4 · dim); dropout_p: 0.1.
    """

    def __init__(self, dim: int = 256, num_layers: int = 2, num_heads: int = 8,
                 feedforward: int = 1024, dropout_p: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(TransformerEncoderLayer(dim, num_heads, feedforward,
                                                            dropout_p)
                                    for _ in range(num_layers))
        self.attn = nn.Linear(dim, 1)

    def forward(self, groups: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """(B, G, C, Ns) -> (B, C, Ns)."""
        B, G, C, Ns = groups.shape
        tokens = groups.permute(0, 3, 1, 2).reshape(B * Ns, G, C)
        for layer in self.layers:
            tokens = layer(tokens, generator)
        weights = torch.softmax(self.attn(tokens), dim=1)  # (B·Ns, G, 1)
        return (tokens * weights).sum(dim=1).view(B, Ns, C).transpose(1, 2)


@MODELS.register_module()
class MultiScaleInteractiveCrop(nn.Module):
    """FineGrasp's ``cy_groups`` + ``fuse_multi_scale``: one
    :class:`~.economic_heads.InteractiveCylinderCrop` per radius ``radius · scale`` (each with
    its own weights), among the seeds along the chosen view, then
    :class:`GroupTransformerFusion` -> (B, C, Ns). The cylinder queries of every radius are
    one call (one kernel on CUDA) and the grouped points of every radius one gather.

    Args:
        in_channels: seed feature width (512).
        radius: the largest radius (0.07 m); scales: radius fractions, one group each
            (0.25, 0.5, 0.75, 1.0).
        channels, channels2, attention_dropout, hmin, hmax, nsample: each group's
            (see :class:`~.economic_heads.InteractiveCylinderCrop`; 256/256, 256/256, 0.05,
            −0.02, 0.04, 16).
        fusion_layers, fusion_heads, fusion_feedforward, fusion_dropout: the transformer
            encoder (2, 8, 1024, 0.1).
    """

    def __init__(self, in_channels: int = 512, radius: float = 0.07,
                 scales: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                 channels: Sequence[int] = (256, 256), channels2: Sequence[int] = (256, 256),
                 attention_dropout: float = 0.05, hmin: float = -0.02, hmax: float = 0.04,
                 nsample: int = 16, fusion_layers: int = 2, fusion_heads: int = 8,
                 fusion_feedforward: int = 1024, fusion_dropout: float = 0.1):
        super().__init__()
        self.groups = nn.ModuleList(
            InteractiveCylinderCrop(in_channels, channels, channels2, attention_dropout,
                                    radius * s, hmin, hmax, nsample) for s in scales)
        self.out_channels = self.groups[0].out_channels
        self.fusion = GroupTransformerFusion(self.out_channels, fusion_layers, fusion_heads,
                                             fusion_feedforward, fusion_dropout)

    def forward(self, seeds: Tensor, features: Tensor, rotations: Tensor,
                generator: Optional[torch.Generator] = None) -> Tensor:
        first = self.groups[0]
        idx = cylinder_queries(seeds, seeds, rotations, [g.radius for g in self.groups],
                               first.hmin, (first.hmax, ), first.nsample)[:, 0]  # (R, B, Ns, k)
        R, B, Ns, k = idx.shape
        flat = idx.permute(1, 0, 2, 3).reshape(B, R * Ns, k)
        grouped = group_points(torch.cat([seeds.transpose(1, 2), features], 1), flat)
        grouped = grouped.view(B, -1, R, Ns, k)  # (B, 3 + C, R, Ns, k)
        offsets = grouped[:, :3] - seeds.transpose(1, 2)[:, :, None, :, None]
        local = torch.einsum('birns,bnij->bjrns', offsets, rotations)  # Rᵀ(q − c)
        outs = []
        for r, group in enumerate(self.groups):
            crop = torch.cat([local[:, :, r] / group.radius, grouped[:, 3:, r]], dim=1)
            outs.append(group.interact(crop, seeds, generator))
        return self.fusion(torch.stack(outs, dim=1), generator)
