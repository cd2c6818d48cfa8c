"""EconomicGrasp's heads after the view selection (iSEE-Laboratory/EconomicGrasp
``models/modules_economicgrasp.py`` @7361bb6): cylinder grouping with attention among the
grouped points, and the grasp head whose angle/depth/width/score tokens attend to each other.

The graspable head and the view head are GSNet's (``GraspableHead``, ``ApproachHead``: same
layers, same min–max normalised multinomial view draw in training, argmax at inference).
"""
import math
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from .gsnet_heads import CloudCrop

#: The composite score: class k of the 6 score classes stands for a score of 0.2·k.
SCORE_CLASS_VALUES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def dropout(x: Tensor, p: float, generator: Optional[torch.Generator]) -> Tensor:
    """Inverted dropout whose mask comes from ``generator`` (the batch's: a draw of
    (seed, epoch, sample indices), not of the global RNG); identity when ``generator`` is None
    (evaluation) or ``p`` is 0."""
    if generator is None or p == 0:
        return x
    keep = torch.empty_like(x).bernoulli_(1 - p, generator=generator)
    return x * keep / (1 - p)


class AttentionBlock(nn.Module):
    """The reference's ``AttentionModule``: multi-head attention of (query, key, value)
    projections with dropout on the attention weights, an output projection, and
    ``LayerNorm(value + attention)`` (the residual is the unprojected value input).

    Args:
        dim: token width.
        num_heads: attention heads (the reference uses 1 everywhere).
        attention_dropout: dropout probability on the attention weights (0.05).
    """

    def __init__(self, dim: int, num_heads: int = 1, attention_dropout: float = 0.05):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'AttentionBlock: dim {dim} is not a multiple of num_heads '
                             f'{num_heads}')
        self.num_heads, self.attention_dropout = num_heads, attention_dropout
        self.query, self.key, self.value, self.out = (nn.Linear(dim, dim) for _ in range(4))
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """Self-attention of ``tokens`` (T, L, dim) -> (T, L, dim)."""
        T, L, dim = tokens.shape
        # the three projections as one product (their backward too: one instead of three)
        projs = (self.query, self.key, self.value)
        qkv = F.linear(tokens, torch.cat([p.weight for p in projs]),
                       torch.cat([p.bias for p in projs]))
        q, k, v = (x.view(T, L, self.num_heads, -1).transpose(1, 2)
                   for x in qkv.split(dim, dim=-1))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        weights = dropout(weights, self.attention_dropout, generator)
        attended = (weights @ v).transpose(1, 2).reshape(T, L, dim)
        return self.norm(tokens + self.out(attended))


@MODELS.register_module()
class InteractiveCylinderCrop(CloudCrop):
    """``Cylinder_Grouping_Global_Interaction``: GSNet's cylinder crop and shared MLP (the
    grouping is the same: rotated, radius-normalised local coordinates and the seed features),
    then the seed's own coordinates appended to every grouped point, attention among the
    ``nsample`` points of each crop, a second shared MLP and max pooling -> (B, C, Ns).

    Args:
        in_channels: seed feature width (512).
        channels: widths of the first MLP (256, 256).
        channels2: widths of the second MLP, after the attention (256, 256).
        attention_dropout: dropout on the attention weights (0.05).
        radius, hmin, hmax, nsample: the cylinder (0.05, −0.02, 0.04, 16).
    """

    def __init__(self, in_channels: int = 512, channels: Sequence[int] = (256, 256),
                 channels2: Sequence[int] = (256, 256), attention_dropout: float = 0.05,
                 radius: float = 0.05, hmin: float = -0.02, hmax: float = 0.04,
                 nsample: int = 16):
        super().__init__(in_channels, tuple(channels), radius, hmin, hmax, nsample)
        width = self.out_channels + 3
        self.attention = AttentionBlock(width, 1, attention_dropout)
        layers = []
        for out in channels2:
            layers += [nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            width = out
        self.mlp2 = nn.Sequential(*layers)
        self.out_channels = width

    def forward(self, seeds: Tensor, features: Tensor, rotations: Tensor,
                generator: Optional[torch.Generator] = None) -> Tensor:
        return self.interact(self.group(seeds, features, rotations), seeds, generator)

    def interact(self, crop: Tensor, seeds: Tensor,
                 generator: Optional[torch.Generator] = None) -> Tensor:
        """Grouped crop (B, 3 + C_in, Ns, k) (:meth:`group`'s) -> (B, C, Ns): the MLP, the
        seed coordinates appended, attention among the k points, the second MLP, max pool."""
        grouped = self.mlp(crop)  # (B, C, Ns, k)
        B, C, Ns, k = grouped.shape
        coords = seeds.transpose(1, 2)[..., None].expand(-1, -1, -1, k)
        tokens = torch.cat([grouped, coords], dim=1).permute(0, 2, 3, 1).reshape(B * Ns, k, C + 3)
        tokens = self.attention(tokens, generator)
        tokens = tokens.view(B, Ns, k, C + 3).permute(0, 3, 1, 2)
        return self.mlp2(tokens).amax(dim=3)


@MODELS.register_module()
class InteractiveGraspHead(nn.Module):
    """``Grasp_Head_Local_Interaction``: four 1×1 convs make an angle, a depth, a width and a
    score token (64 wide) per seed; the four tokens attend to each other; then angle
    (``num_angles`` + 1 classes), depth (``num_depths`` + 1), width (1) and score
    (6 classes) logits. The extra angle/depth class is the label assigner's "unmatched"
    default (12, 4), kept as the reference has it.

    Args:
        in_channels: crop feature width (256).
        num_angles, num_depths: in-plane angles (12) and depths (4) of the label grid.
        embed_channels: width of each token (64).
        attention_dropout: dropout on the attention weights (0.05).
    """

    KINDS = ('angle', 'depth', 'width', 'score')

    def __init__(self, in_channels: int = 256, num_angles: int = 12, num_depths: int = 4,
                 embed_channels: int = 64, attention_dropout: float = 0.05):
        super().__init__()
        self.embed_channels = embed_channels
        self.embeddings = nn.ModuleDict({name: nn.Conv1d(in_channels, embed_channels, 1)
                                     for name in self.KINDS})
        self.attention = AttentionBlock(embed_channels, 1, attention_dropout)
        classes = dict(angle=num_angles + 1, depth=num_depths + 1, width=1,
                       score=len(SCORE_CLASS_VALUES))
        self.outputs = nn.ModuleDict({name: nn.Conv1d(embed_channels, classes[name], 1)
                                      for name in self.KINDS})

    def forward(self, features: Tensor, generator: Optional[torch.Generator] = None
                ) -> Dict[str, Tensor]:
        """(B, C, Ns) -> angle (B, A + 1, Ns), depth (B, D + 1, Ns), width (B, Ns), score
        (B, 6, Ns) logits."""
        B, _, Ns = features.shape
        # the four 1x1 embeddings of the same features as one conv (one launch, and one in
        # each of its backward products, instead of four)
        weight = torch.cat([self.embeddings[name].weight for name in self.KINDS])
        bias = torch.cat([self.embeddings[name].bias for name in self.KINDS])
        tokens = F.conv1d(features, weight, bias).view(B, len(self.KINDS), -1, Ns)
        tokens = tokens.permute(0, 3, 1, 2).reshape(B * Ns, len(self.KINDS), -1)
        tokens = self.attention(tokens, generator).view(B, Ns, len(self.KINDS), -1)
        out = {name: self.outputs[name](tokens[:, :, i].transpose(1, 2))
               for i, name in enumerate(self.KINDS)}
        out['width'] = out['width'][:, 0]
        return out

    @staticmethod
    def composite_score(score_logits: Tensor) -> Tensor:
        """(B, 6, Ns) -> (B, Ns): Σ_k 0.2·k · logit_k, on the raw logits (no softmax), as the
        reference's ``pred_decode``."""
        values = score_logits.new_tensor(SCORE_CLASS_VALUES)
        return (score_logits * values[:, None]).sum(dim=1)
