"""PointNet++ backbones of GraspNet-baseline and Scale-Balanced-Grasp, in pure PyTorch.

Set abstraction (SA): furthest point sampling, ball query, grouping of the neighbours' offsets
(divided by the radius) and features, a shared MLP (1×1 conv, BN, ReLU per layer) and a max
over the neighbours — pointnet2's ``PointnetSAModuleVotes`` with ``use_xyz=True`` and
``normalize_xyz=True``. Feature propagation (FP): inverse-distance interpolation from the 3
nearest coarse points, concatenated with the skip features, then a shared MLP
(``PointnetFPModule``).
"""
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from mmgrasp.ops.point_ops import (ball_query, furthest_point_sample, group_points,
                                   three_nn_interpolate)


def shared_mlp(channels: Sequence[int], dim: int = 2) -> nn.Sequential:
    """pointnet2's ``SharedMLP(bn=True)``: per layer a bias-free 1×1 conv, BN and ReLU."""
    conv, norm = (nn.Conv2d, nn.BatchNorm2d) if dim == 2 else (nn.Conv1d, nn.BatchNorm1d)
    layers = []
    for c_in, c_out in zip(channels[:-1], channels[1:]):
        layers += [conv(c_in, c_out, 1, bias=False), norm(c_out), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


def _scaled(channels: Sequence[int], scale: float) -> Tuple[int, ...]:
    return tuple(max(1, int(round(c * scale))) for c in channels)


class SetAbstraction(nn.Module):
    """One SA level: (B, N, 3) points and (B, C, N) features -> ``npoint`` centres.

    Args:
        npoint: centres chosen by furthest point sampling.
        radius: ball query radius (metres); grouped offsets are divided by it.
        nsample: neighbours per centre.
        in_channels: C of the input features (0: points only).
        mlp: output channels of the shared MLP layers (3 + C goes in).

    Returns ``(new_xyz (B, npoint, 3), new_features (B, mlp[-1], npoint), inds (B, npoint))``,
    ``inds`` indexing the input points.
    """

    def __init__(self, npoint: int, radius: float, nsample: int, in_channels: int,
                 mlp: Sequence[int]):
        super().__init__()
        self.npoint, self.radius, self.nsample = npoint, radius, nsample
        self.mlp = shared_mlp([in_channels + 3, *mlp])
        self.out_channels = mlp[-1]

    def forward(self, xyz: Tensor, features: Optional[Tensor]):
        inds = furthest_point_sample(xyz, self.npoint)
        new_xyz = torch.gather(xyz, 1, inds[..., None].expand(-1, -1, 3))
        idx = ball_query(self.radius, self.nsample, xyz, new_xyz)
        grouped = group_points(xyz.transpose(1, 2).contiguous(), idx)  # (B, 3, S, k)
        grouped = (grouped - new_xyz.transpose(1, 2)[..., None]) / self.radius
        if features is not None:
            grouped = torch.cat([grouped, group_points(features, idx)], dim=1)
        return new_xyz, self.mlp(grouped).amax(dim=3), inds


class FeaturePropagation(nn.Module):
    """One FP level: coarse features interpolated to finer points, concatenated with the finer
    points' own features (``skip_channels``), then a shared MLP -> (B, mlp[-1], n)."""

    def __init__(self, skip_channels: int, in_channels: int, mlp: Sequence[int]):
        super().__init__()
        self.mlp = shared_mlp([skip_channels + in_channels, *mlp], dim=1)
        self.out_channels = mlp[-1]

    def forward(self, unknown: Tensor, known: Tensor, unknown_feats: Optional[Tensor],
                known_feats: Tensor) -> Tensor:
        interpolated = three_nn_interpolate(unknown, known, known_feats)
        if unknown_feats is not None:
            interpolated = torch.cat([interpolated, unknown_feats], dim=1)
        return self.mlp(interpolated)


@MODELS.register_module()
class PointNet2Backbone(nn.Module):
    """GraspNet-baseline's PointNet++ (models/backbone.py): four SA levels and two FP levels
    back to the second level, whose points are the seeds.

    Args:
        in_channels: per-point input features after xyz (0: ``points`` is (B, N, 3)).
        npoints: centres of the SA levels (2048, 1024, 512, 256); the seeds are ``npoints[1]``.
        radii: ball query radii (0.04, 0.1, 0.2, 0.3) m.
        nsamples: neighbours per centre (64, 32, 16, 16).
        sa_mlps: SA MLP output channels ((64, 64, 128), (128, 128, 256), (128, 128, 256),
            (128, 128, 256)); each level gets 3 + the previous level's channels.
        fp_mlps: FP MLP output channels ((256, 256), (256, 256)).
        scale: multiplier of every MLP width (rounded), to shrink the network for CPU demos;
            the data and the point counts stay as given.

    Shapes (B frames, N points, Ns = ``npoints[1]`` seeds, C = ``out_channels``):
        - points: (B, N, 3 + in_channels)
        - returns a dict with ``seed_features`` (B, C, Ns), ``seed_xyz`` (B, Ns, 3),
          ``seed_inds`` (B, Ns) int64 indices of the seeds into ``points`` (BL's ``fp2_inds``),
          and ``sa_inds`` (list of the SA levels' (B, npoint) indices into the level below).
    """

    def __init__(self, in_channels: int = 0,
                 npoints: Sequence[int] = (2048, 1024, 512, 256),
                 radii: Sequence[float] = (0.04, 0.1, 0.2, 0.3),
                 nsamples: Sequence[int] = (64, 32, 16, 16),
                 sa_mlps: Sequence[Sequence[int]] = ((64, 64, 128), (128, 128, 256),
                                                     (128, 128, 256), (128, 128, 256)),
                 fp_mlps: Sequence[Sequence[int]] = ((256, 256), (256, 256)),
                 scale: float = 1.0):
        super().__init__()
        if not len(npoints) == len(radii) == len(nsamples) == len(sa_mlps):
            raise ValueError('PointNet2Backbone: npoints, radii, nsamples and sa_mlps need one '
                             'entry per SA level')
        if not 1 <= len(fp_mlps) < len(npoints):
            raise ValueError(f'PointNet2Backbone: {len(fp_mlps)} FP levels for {len(npoints)} '
                             f'SA levels; the seeds must be at an SA level above the first')
        if any(a <= b for a, b in zip(npoints[:-1], npoints[1:])):
            raise ValueError(f'PointNet2Backbone: npoints must decrease, got {tuple(npoints)}')
        self.in_channels = in_channels
        self.sa = nn.ModuleList()
        channels = [in_channels]
        for npoint, radius, nsample, mlp in zip(npoints, radii, nsamples, sa_mlps):
            self.sa.append(SetAbstraction(npoint, radius, nsample, channels[-1],
                                          _scaled(mlp, scale)))
            channels.append(self.sa[-1].out_channels)
        self.fp = nn.ModuleList()
        coarse = channels[-1]
        for i, mlp in enumerate(fp_mlps):
            skip = channels[len(npoints) - 1 - i]  # SA level len-1-i (1-based in channels)
            self.fp.append(FeaturePropagation(skip, coarse, _scaled(mlp, scale)))
            coarse = self.fp[-1].out_channels
        self.seed_level = len(npoints) - len(fp_mlps)  # 1-based SA level of the seeds
        self.out_channels = coarse
        self.num_seeds = npoints[self.seed_level - 1]

    def forward(self, points: Tensor) -> Dict[str, Tensor]:
        xyz = points[..., :3].contiguous()
        features = points[..., 3:].transpose(1, 2).contiguous() if points.shape[-1] > 3 \
            else None
        level_xyz, level_features, sa_inds = [xyz], [features], []
        for sa in self.sa:
            xyz, features, inds = sa(xyz, features)
            level_xyz.append(xyz)
            level_features.append(features)
            sa_inds.append(inds)
        features = level_features[-1]
        for i, fp in enumerate(self.fp):
            fine = len(self.sa) - 1 - i
            features = fp(level_xyz[fine], level_xyz[fine + 1], level_features[fine], features)
        # seed indices into the input cloud: compose the FPS indices down to the seed level
        # (BL takes sa1_inds[:, :1024], equal when FPS of FPS keeps the prefix)
        seed_inds = sa_inds[0]
        for inds in sa_inds[1:self.seed_level]:
            seed_inds = torch.gather(seed_inds, 1, inds)
        return dict(seed_features=features, seed_xyz=level_xyz[self.seed_level],
                    seed_inds=seed_inds, sa_inds=sa_inds)


class TransformerBlock(nn.Module):
    """Point Transformer layer over the k nearest points (Scale-Balanced-Grasp pct_zh.py):
    (B, N, 3) points and (B, C, N) features -> (B, C, N), residual."""

    def __init__(self, channels: int, d_model: int, k: int = 16):
        super().__init__()
        self.k = k
        self.fc1 = nn.Linear(channels, d_model)
        self.fc2 = nn.Linear(d_model, channels)
        self.fc_delta = nn.Sequential(nn.Linear(3, d_model), nn.ReLU(),
                                      nn.Linear(d_model, d_model))
        self.fc_gamma = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU(),
                                      nn.Linear(d_model, d_model))
        self.w_qs = nn.Linear(d_model, d_model, bias=False)
        self.w_ks = nn.Linear(d_model, d_model, bias=False)
        self.w_vs = nn.Linear(d_model, d_model, bias=False)

    @staticmethod
    def _index(values: Tensor, idx: Tensor) -> Tensor:
        """values (B, N, C), idx (B, N, k) -> (B, N, k, C)."""
        B, N, k = idx.shape
        flat = idx.reshape(B, N * k, 1).expand(-1, -1, values.shape[-1])
        return values.gather(1, flat).view(B, N, k, -1)

    def forward(self, xyz: Tensor, features: Tensor) -> Tensor:
        pre = features.transpose(1, 2)
        d = torch.cdist(xyz, xyz, compute_mode='donot_use_mm_for_euclid_dist')
        knn_idx = d.topk(min(self.k, xyz.shape[1]), dim=-1, largest=False, sorted=True).indices
        knn_xyz = self._index(xyz, knn_idx)
        x = self.fc1(pre)
        q = self.w_qs(x)
        k = self._index(self.w_ks(x), knn_idx)
        v = self._index(self.w_vs(x), knn_idx)
        pos = self.fc_delta(xyz[:, :, None] - knn_xyz)
        attn = self.fc_gamma(q[:, :, None] - k + pos)
        attn = F.softmax(attn / k.shape[-1] ** 0.5, dim=-2)
        out = torch.einsum('bmnf,bmnf->bmf', attn, v + pos)
        return (self.fc2(out) + pre).transpose(1, 2).contiguous()


@MODELS.register_module()
class PointTransformerLightBackbone(nn.Module):
    """Scale-Balanced-Grasp's ``PointTransformerBackbone_light``: two SA levels, each followed
    by a Point Transformer layer; the second level's points are the seeds.

    Args:
        in_channels: per-point input features after xyz.
        npoints: (2048, 1024); radii (0.04, 0.1); nsamples (64, 32).
        sa_mlps: ((64, 64, 128), (128, 128, 256)).
        k: neighbours of the transformer layers (16).
        scale: multiplier of every MLP width (CPU demos).

    Shapes: as :class:`PointNet2Backbone`; ``seed_inds`` = sa1_inds gathered at sa2_inds.
    """

    def __init__(self, in_channels: int = 0, npoints: Sequence[int] = (2048, 1024),
                 radii: Sequence[float] = (0.04, 0.1), nsamples: Sequence[int] = (64, 32),
                 sa_mlps: Sequence[Sequence[int]] = ((64, 64, 128), (128, 128, 256)),
                 k: int = 16, scale: float = 1.0):
        super().__init__()
        mlps = [_scaled(m, scale) for m in sa_mlps]
        self.sa1 = SetAbstraction(npoints[0], radii[0], nsamples[0], in_channels, mlps[0])
        self.sa2 = SetAbstraction(npoints[1], radii[1], nsamples[1], mlps[0][-1], mlps[1])
        self.transformer1 = TransformerBlock(mlps[0][-1], mlps[0][-1], k)
        self.transformer2 = TransformerBlock(mlps[1][-1], mlps[1][-1], k)
        self.out_channels = mlps[1][-1]
        self.num_seeds = npoints[1]

    def forward(self, points: Tensor) -> Dict[str, Tensor]:
        xyz = points[..., :3].contiguous()
        features = points[..., 3:].transpose(1, 2).contiguous() if points.shape[-1] > 3 \
            else None
        xyz1, features, inds1 = self.sa1(xyz, features)
        features = self.transformer1(xyz1, features)
        xyz2, features, inds2 = self.sa2(xyz1, features)
        features = self.transformer2(xyz2, features)
        return dict(seed_features=features, seed_xyz=xyz2,
                    seed_inds=torch.gather(inds1, 1, inds2), sa_inds=[inds1, inds2])


__all__ = ['PointNet2Backbone', 'PointTransformerLightBackbone', 'SetAbstraction',
           'FeaturePropagation', 'TransformerBlock', 'shared_mlp']
