"""FineGrasp's multi-scale crop (HorizonRobotics/RoboOrchardLab
``robo_orchard_lab/models/finegrasp/finegrasp.py`` and ``head/head.py`` @241bbc6): four
EconomicGrasp cylinder groups of radii 0.07 × (0.25, 0.5, 0.75, 1.0) around each seed, fused by
a 2-layer transformer encoder over the four groups and softmax weights.

The reference's ``CylinderGroup`` is EconomicGrasp's ``Cylinder_Grouping_Global_Interaction``
line for line (MLP, one-head attention among the 16 grouped points, MLP, max pooling), so each
group is an :class:`~.economic_heads.InteractiveCylinderCrop`; its ``LocalInteraction`` is
EconomicGrasp's grasp head (:class:`~.economic_heads.InteractiveGraspHead`) and its
``GraspableNet``/``ApproachNet`` are GSNet's heads. What FineGrasp adds is here.

The four groups run as one: their weights are stacked along a group axis
(:class:`StackedInteractiveGroups`: one batched matmul / batch norm / attention for all four
instead of four of each, which keeps a training iteration within the CUDA launch budget), while
``state_dict`` shows and takes them per group under the names of four
:class:`~.economic_heads.InteractiveCylinderCrop` (``groups.{g}.mlp.0.weight`` ...), so the
reference's ``cy_groups.{g}`` tensors map one to one.
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from mmgrasp.ops.point_ops import cylinder_queries, group_points
from mmgrasp.models.utils.recompute import recomputed
from .economic_heads import InteractiveCylinderCrop


def dropout(x: Tensor, p: float, generator: Optional[torch.Generator]) -> Tensor:
    """Inverted dropout with the mask drawn from ``generator`` (the batch's), identity when it
    is None or ``p`` is 0. The mask is scaled before the product (``x · (keep / (1 − p))``),
    so the backward is one product."""
    if generator is None or p == 0:
        return x
    keep = torch.empty_like(x).bernoulli_(1 - p, generator=generator).div_(1 - p)
    return x * keep


class DropoutMasks:
    """The inverted-dropout masks of one forward pass, drawn at once from the batch's
    generator: one Bernoulli draw and one scaling by 1 / (1 − p) for all of them (instead of
    two launches per dropout), handed out in order by :meth:`__call__`. Deterministic given
    the generator's state, like every other draw of the model.

    Args:
        shapes: the shapes of the tensors to drop, in the order they are dropped.
        p: the dropout probability.
        generator: the batch's generator.
        like: a tensor with the device and dtype of the masks.
    """

    def __init__(self, shapes: Sequence[Tuple[int, ...]], p: float,
                 generator: torch.Generator, like: Tensor):
        sizes = [math.prod(shape) for shape in shapes]
        flat = like.new_empty(sum(sizes)).bernoulli_(1 - p, generator=generator).div_(1 - p)
        self._masks = iter([m.view(shape) for m, shape in zip(flat.split(sizes), shapes)])

    def __call__(self, x: Tensor) -> Tensor:
        return x * next(self._masks)


def _identity(x: Tensor) -> Tensor:
    return x


class SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` (packed ``in_proj_weight``/``in_proj_bias``, ``out_proj``: the
    same parameter names and layout, so a reference state dict loads as is) whose dropout on
    the attention weights takes its mask from the caller (:class:`DropoutMasks`, the batch's
    generator) instead of the global RNG.

    Args:
        dim: token width; num_heads: heads (dim must be a multiple).
    """

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'SelfAttention: dim {dim} is not a multiple of num_heads '
                             f'{num_heads}')
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)  # nn.MultiheadAttention's init
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, tokens: Tensor, drop=_identity) -> Tensor:
        """(T, L, dim) -> (T, L, dim): every one of the T sequences attends within itself;
        ``drop`` drops attention weights (T, heads, L, L)."""
        T, L, dim = tokens.shape
        H = self.num_heads
        qkv = F.linear(tokens, self.in_proj_weight, self.in_proj_bias)
        # q, k, v of every head contiguous in one copy: (3, T·H, L, head_dim)
        q, k, v = qkv.view(T, L, 3, H, -1).permute(2, 0, 3, 1, 4).reshape(3, T * H, L, -1)
        scores = torch.baddbmm(q.new_empty(()), q, k.transpose(1, 2), beta=0,
                               alpha=1 / math.sqrt(q.shape[-1]))  # q·kᵀ / √d in one GEMM
        weights = drop(torch.softmax(scores, dim=-1).view(T, H, L, L)).view(T * H, L, L)
        attended = torch.bmm(weights, v).view(T, H, L, -1).transpose(1, 2).reshape(T, L, dim)
        return self.out_proj(attended)


class TransformerEncoderLayer(nn.Module):
    """``nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward)`` with its defaults
    (post-norm, ReLU, dropout at its four places, LayerNorm eps 1e-5) and its parameter
    names; the dropout masks come from the caller (:class:`DropoutMasks`)."""

    def __init__(self, dim: int, num_heads: int, feedforward: int):
        super().__init__()
        self.self_attn = SelfAttention(dim, num_heads)
        self.linear1 = nn.Linear(dim, feedforward)
        self.linear2 = nn.Linear(feedforward, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)

    def dropout_shapes(self, T: int, L: int) -> List[Tuple[int, ...]]:
        """The shapes :meth:`forward` drops, in order, for T sequences of L tokens."""
        dim, H = self.linear1.in_features, self.self_attn.num_heads
        return [(T, H, L, L), (T, L, dim), (T, L, self.linear1.out_features), (T, L, dim)]

    def forward(self, x: Tensor, drop=_identity) -> Tensor:
        x = self.norm1(x + drop(self.self_attn(x, drop)))
        hidden = drop(F.relu(self.linear1(x)))
        return self.norm2(x + drop(self.linear2(hidden)))


class GroupTransformerFusion(nn.Module):
    """The reference's ``GroupTransformerFusion``: per seed, the G group features are a
    sequence of G tokens through a transformer encoder; a linear layer scores each output
    token and the softmax over the G tokens weighs their sum.

    Args:
        dim: feature width (256); num_layers: encoder layers (2); num_heads: 8;
        feedforward: hidden width of the feed-forward (1024 = 4 · dim); dropout_p: the
            encoder's dropout (0.1, ``nn.TransformerEncoderLayer``'s default), drawn from the
            batch's generator in training (all masks of a pass in one draw).
    """

    def __init__(self, dim: int = 256, num_layers: int = 2, num_heads: int = 8,
                 feedforward: int = 1024, dropout_p: float = 0.1):
        super().__init__()
        self.dropout_p = dropout_p
        self.layers = nn.ModuleList(TransformerEncoderLayer(dim, num_heads, feedforward)
                                    for _ in range(num_layers))
        self.attn = nn.Linear(dim, 1)

    def forward(self, groups: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """(B, G, C, Ns) -> (B, C, Ns)."""
        B, G, C, Ns = groups.shape
        tokens = groups.permute(0, 3, 1, 2).reshape(B * Ns, G, C)
        drop = _identity
        if generator is not None and self.dropout_p > 0:
            drop = DropoutMasks([s for layer in self.layers
                                 for s in layer.dropout_shapes(B * Ns, G)],
                                self.dropout_p, generator, tokens)
        for layer in self.layers:
            tokens = layer(tokens, drop)
        weights = torch.softmax(self.attn(tokens), dim=1)  # (B·Ns, G, 1)
        fused = torch.bmm(weights.transpose(1, 2), tokens)  # Σ_g w_g · token_g, one product
        return fused.view(B, Ns, C).transpose(1, 2)


class StackedInteractiveGroups(nn.Module):
    """G :class:`~.economic_heads.InteractiveCylinderCrop` bodies (MLP, one-head attention among
    the k grouped points with the seed coordinates appended, second MLP, max pooling) computed
    at once: each weight is stacked along a leading group axis, each 1×1 conv a batched matmul,
    each BatchNorm2d one ``batch_norm`` over the G·C channels (statistics per group and
    channel over (B, Ns, k), as each group's own), the attention a batched attention.

    ``state_dict`` holds the weights per group, named and shaped as G separate
    InteractiveCylinderCrop modules (``{g}.mlp.{3i}.weight`` (C_out, C_in, 1, 1),
    ``{g}.mlp.{3i + 1}.running_mean`` ..., ``{g}.attention.query.weight`` ...), and loading
    takes that layout; the initial values are those of G such modules built in turn.

    Args:
        crops: the G modules whose layout and initial weights are taken (then dropped).
    """

    def __init__(self, crops: Sequence[InteractiveCylinderCrop]):
        super().__init__()
        first = crops[0]
        self.num_groups = len(crops)
        self.radii = tuple(c.radius for c in crops)
        self.hmin, self.hmax, self.nsample = first.hmin, first.hmax, first.nsample
        self.attention_dropout = first.attention.attention_dropout
        self.out_channels = first.out_channels
        #: (stacked name, per-group suffix, per-group shape, index along the stacked tensor's
        #: second axis or None) of every per-group tensor, in InteractiveCylinderCrop's order
        self._layout: List[Tuple[str, str, Tuple[int, ...], Optional[int]]] = []
        self._counters: List[Tensor] = []
        self.mlp_depth = self._stack_mlp('mlp', [c.mlp for c in crops])
        attention = [c.attention for c in crops]
        # the projection weights stored transposed, (D_in, [3,] D_out) a group, as the batched
        # products take them (their gradients then need no copy to the parameter's layout)
        self._transposed = frozenset(('qkv_weight', 'out_weight'))
        self._stack('qkv_weight', [torch.stack([a.query.weight.T, a.key.weight.T,
                                                a.value.weight.T], dim=1) for a in attention],
                    None)
        self._stack('qkv_bias', [torch.stack([a.query.bias, a.key.bias, a.value.bias])
                                 for a in attention], None)
        dim = first.attention.query.weight.shape[0]
        for i, proj in enumerate(('query', 'key', 'value')):
            self._layout += [('qkv_weight', f'attention.{proj}.weight', (dim, dim), i),
                             ('qkv_bias', f'attention.{proj}.bias', (dim, ), i)]
        self._stack('out_weight', [a.out.weight.T for a in attention], 'attention.out.weight',
                    shape=tuple(first.attention.out.weight.shape))
        for name, part in (('out_bias', 'out.bias'), ('norm_weight', 'norm.weight'),
                           ('norm_bias', 'norm.bias')):
            module, tail = part.split('.')
            self._stack(name, [getattr(getattr(a, module), tail) for a in attention],
                        f'attention.{part}')
        self.mlp2_depth = self._stack_mlp('mlp2', [c.mlp2 for c in crops])
        self.register_buffer('num_batches_tracked', torch.stack(self._counters, 1).clone())
        del self._counters
        self.register_state_dict_post_hook(StackedInteractiveGroups._per_group_state)
        self.register_load_state_dict_pre_hook(StackedInteractiveGroups._stack_state)

    def _stack(self, name: str, tensors: Sequence[Tensor], suffix: Optional[str],
               buffer: bool = False, shape: Optional[Tuple[int, ...]] = None) -> None:
        stacked = torch.stack([t.detach() for t in tensors]).clone()
        if buffer:
            self.register_buffer(name, stacked)
        else:
            setattr(self, name, nn.Parameter(stacked))
        if suffix is not None:
            self._layout.append((name, suffix, shape or tuple(tensors[0].shape), None))

    def _stack_mlp(self, name: str, mlps: Sequence[nn.Sequential]) -> int:
        """conv (no bias) + BatchNorm2d + ReLU triples -> stacked tensors; their number."""
        depth = len(mlps[0]) // 3
        for i in range(depth):
            convs, norms = [m[3 * i] for m in mlps], [m[3 * i + 1] for m in mlps]
            self._stack(f'{name}{i}_weight', [c.weight.flatten(1) for c in convs],
                        f'{name}.{3 * i}.weight', shape=tuple(convs[0].weight.shape))
            for tail in ('weight', 'bias'):
                self._stack(f'{name}{i}_bn_{tail}', [getattr(n, tail) for n in norms],
                            f'{name}.{3 * i + 1}.{tail}')
            for tail in ('running_mean', 'running_var'):
                self._stack(f'{name}{i}_{tail}', [getattr(n, tail) for n in norms],
                            f'{name}.{3 * i + 1}.{tail}', buffer=True)
            # every norm's counter in one (G, norms) buffer: one increment a pass
            self._counters.append(torch.stack([n.num_batches_tracked for n in norms]))
            self._layout.append(('num_batches_tracked', f'{name}.{3 * i + 1}.num_batches_tracked',
                                 (), len(self._counters) - 1))
        self.bn_momentum, self.bn_eps = mlps[0][1].momentum, mlps[0][1].eps
        return depth

    def _per_group_state(self, state: Dict[str, Tensor], prefix: str, metadata) -> None:
        """state_dict hook: the stacked tensors -> G per-group entries, group by group."""
        stacked = {name: state.pop(prefix + name) for name in
                   dict.fromkeys(entry[0] for entry in self._layout)}
        for g in range(self.num_groups):
            for name, suffix, shape, part in self._layout:
                value = stacked[name][g]
                if name in self._transposed:
                    value = (value if part is None else value[:, part]).T
                elif part is not None:
                    value = value[part]
                state[f'{prefix}{g}.{suffix}'] = value.reshape(shape)

    def _stack_state(self, state: Dict[str, Tensor], prefix: str, *args) -> None:
        """load_state_dict pre-hook: G per-group entries -> the stacked tensor (left alone
        when an entry is missing: the load then names what is missing)."""
        names = dict.fromkeys(entry[0] for entry in self._layout)
        for name in names:
            entries = [e for e in self._layout if e[0] == name]
            keys = [[f'{prefix}{g}.{e[1]}' for e in entries] for g in range(self.num_groups)]
            if not all(k in state for row in keys for k in row):
                continue
            target = getattr(self, name)
            per_group = []
            for row in keys:
                parts = [state.pop(k) for k in row]
                if name in self._transposed:
                    parts = [p.T for p in parts]
                    value = torch.stack(parts, 1) if entries[0][3] is not None else parts[0]
                else:
                    value = torch.stack(parts) if entries[0][3] is not None else parts[0]
                per_group.append(value.reshape(target.shape[1:]))
            state[prefix + name] = torch.stack(per_group)

    def _mlp(self, name: str, depth: int, x: Tensor, projected: bool = False) -> Tensor:
        """(G, C_in, M) -> (G, C_out, M): per group conv (bmm), BatchNorm, ReLU, ``depth``
        times; a (G, M, C_in) view is taken as is by the first matmul. ``projected``: ``x`` is
        the first conv's product already."""
        G = self.num_groups
        for i in range(depth):
            if i or not projected:
                x = torch.bmm(getattr(self, f'{name}{i}_weight'), x)
            x = F.batch_norm(x.view(1, -1, x.shape[-1]),
                             getattr(self, f'{name}{i}_running_mean').view(-1),
                             getattr(self, f'{name}{i}_running_var').view(-1),
                             getattr(self, f'{name}{i}_bn_weight').view(-1),
                             getattr(self, f'{name}{i}_bn_bias').view(-1), self.training,
                             self.bn_momentum, self.bn_eps).view(G, -1, x.shape[-1])
            x = F.relu(x)
        return x

    def project(self, crops: Tensor) -> Tensor:
        """crops (G, 3 + C_in, B, Ns, k) -> (G, C, B·Ns·k): the first MLP's first conv."""
        return torch.bmm(self.mlp0_weight, crops.reshape(self.num_groups, crops.shape[1], -1))

    def forward(self, crops: Tensor, seeds: Tensor,
                generator: Optional[torch.Generator] = None) -> Tensor:
        """crops (G, 3 + C_in, B, Ns, k) (the groups' :meth:`InteractiveCylinderCrop.group`
        tensors, group axis first) or their :meth:`project` (G, C, B·Ns·k), seeds (B, Ns, 3)
        -> (G, C, B, Ns)."""
        G, k = self.num_groups, self.nsample
        B, Ns, _ = seeds.shape
        if self.training:
            self.num_batches_tracked.add_(1)
        projected = crops.dim() == 3
        x = self._mlp('mlp', self.mlp_depth, crops if projected else
                      crops.reshape(G, -1, B * Ns * k), projected)
        coords = seeds.permute(2, 0, 1)[None, :, :, :, None].expand(G, -1, -1, -1, k)
        tokens = torch.cat([x.view(G, -1, B, Ns, k), coords], dim=1)  # (G, D, B, Ns, k)
        D = tokens.shape[1]
        tokens = tokens.view(G, D, -1).transpose(1, 2)  # (G, M, D), a view
        qkv = torch.baddbmm(self.qkv_bias.view(G, 1, 3 * D), tokens,
                            self.qkv_weight.view(G, D, 3 * D))
        q, key, v = qkv.view(G * B * Ns, k, 3, D).unbind(2)
        weights = torch.softmax(torch.baddbmm(q.new_empty(()), q, key.transpose(1, 2), beta=0,
                                              alpha=1 / math.sqrt(D)), dim=-1)
        weights = dropout(weights, self.attention_dropout, generator)
        attended = torch.baddbmm(self.out_bias[:, None], (weights @ v).view(G, -1, D),
                                 self.out_weight)
        normed = F.layer_norm(tokens + attended, (D, ))
        normed = torch.addcmul(self.norm_bias[:, None], normed, self.norm_weight[:, None])
        x = self._mlp('mlp2', self.mlp2_depth, normed.transpose(1, 2))
        # max pooling over the k points (max_pool2d's gradient: to one maximum, not shared)
        return x.view(G, -1, B * Ns, k).max(dim=3).values.view(G, -1, B, Ns)


@MODELS.register_module()
class MultiScaleInteractiveCrop(nn.Module):
    """FineGrasp's ``cy_groups`` + ``fuse_multi_scale``: an
    :class:`~.economic_heads.InteractiveCylinderCrop` per radius ``radius · scale`` (each with
    its own weights; run together by :class:`StackedInteractiveGroups`), among the seeds along
    the chosen view, then :class:`GroupTransformerFusion` -> (B, C, Ns). The cylinder queries
    of every radius are one call (one kernel on CUDA) and the grouped points of every radius
    one gather.

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
        self.groups = StackedInteractiveGroups([
            InteractiveCylinderCrop(in_channels, channels, channels2, attention_dropout,
                                    radius * s, hmin, hmax, nsample) for s in scales])
        self.out_channels = self.groups.out_channels
        self.fusion = GroupTransformerFusion(self.out_channels, fusion_layers, fusion_heads,
                                             fusion_feedforward, fusion_dropout)

    def query(self, seeds: Tensor, rotations: Tensor) -> Tensor:
        """(G, B, Ns, k) indices of every radius's cylinder among the seeds."""
        groups = self.groups
        return cylinder_queries(seeds, seeds, rotations, groups.radii, groups.hmin,
                                (groups.hmax, ), groups.nsample)[:, 0]

    def group(self, seeds: Tensor, features: Tensor, rotations: Tensor,
              idx: Optional[Tensor] = None) -> Tensor:
        """(G, 3 + C, B, Ns, k): for every radius, the grouped seeds' local coordinates in the
        grasp frame over the radius (Rᵀ(q − c) / r) and their features (``idx``: the
        :meth:`query`, made when not given)."""
        if idx is None:
            idx = self.query(seeds, rotations)
        return self._join(*self._coordinates(seeds, rotations, idx), features)

    def _coordinates(self, seeds: Tensor, rotations: Tensor, idx: Tensor
                     ) -> Tuple[Tensor, Tensor]:
        """(B, Ns, G, k, 3) local coordinates over the radii and the (B, Ns·G·k) flat indices.
        The coordinates carry no gradient (the seeds have none): gathered on their own, so the
        backward runs through the features' gather only."""
        G, B, Ns, k = idx.shape
        flat = idx.permute(1, 2, 0, 3).reshape(B, Ns * G * k)  # (B, Ns, G, k) order
        grouped_xyz = torch.gather(seeds, 1, flat[..., None].expand(-1, -1, 3))
        offsets = grouped_xyz.view(B, Ns, G * k, 3) - seeds[:, :, None]
        local = torch.matmul(offsets, rotations).view(B, Ns, G, k, 3)  # (Rᵀ(q − c))ᵀ
        radii = local.new_tensor(self.groups.radii).view(1, 1, G, 1, 1)
        return local / radii, flat

    @staticmethod
    def _join(local: Tensor, flat: Tensor, features: Tensor) -> Tensor:
        """The coordinates and the gathered features -> (G, 3 + C, B, Ns, k)."""
        B, Ns, G, k, _ = local.shape
        grouped = group_points(features, flat).view(B, -1, Ns, G, k)
        return torch.cat([local.permute(2, 4, 0, 1, 3), grouped.permute(3, 1, 0, 2, 4)], dim=1)

    def forward(self, seeds: Tensor, features: Tensor, rotations: Tensor,
                generator: Optional[torch.Generator] = None) -> Tensor:
        local, flat = self._coordinates(seeds, rotations, self.query(seeds, rotations))
        if self.training and torch.is_grad_enabled():
            # the grouped crops (515 floats a sampled point and radius at the paper's widths)
            # are the first conv's input, kept for its weight's gradient: gathered again in
            # the backward pass instead (the same gather, concatenation and product)
            crops = recomputed(self._project, local, flat, features)
        else:
            crops = self._project(local, flat, features)
        out = self.groups(crops, seeds, generator)
        return self.fusion(out.permute(2, 0, 1, 3), generator)  # (B, G, C, Ns)

    def _project(self, local: Tensor, flat: Tensor, features: Tensor) -> Tensor:
        return self.groups.project(self._join(local, flat, features))
