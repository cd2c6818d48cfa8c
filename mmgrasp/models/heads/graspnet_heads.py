"""GraspNet-baseline's and Scale-Balanced-Grasp's heads (BL models/modules.py, SBG
models/graspnet.py): approach views and objectness on the seeds, per-depth cylinder crops,
score/angle/width and tolerance per depth.

Shapes: B frames, Ns seeds, N scene points, V views, A angles, D depths (one crop per depth).
"""
from functools import partial
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from mmgrasp.registry import MODELS
from mmgrasp.ops.point_ops import cylinder_queries, group_points
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views
from mmgrasp.models.utils.recompute import recomputed, scratch_running_stats


def depth_hmax(num_depths: int) -> Tuple[float, ...]:
    """Upper cylinder heights of the depth classes: (d + 1)·0.01 m for d < D."""
    return tuple(round((d + 1) * 0.01, 10) for d in range(num_depths))


def _conv_bn_relu(c_in: int, c_out: int) -> list:
    """Conv1d (with bias, as BL's heads) + BatchNorm1d + ReLU."""
    return [nn.Conv1d(c_in, c_out, 1), nn.BatchNorm1d(c_out), nn.ReLU(inplace=True)]


@MODELS.register_module()
class ApproachNet(nn.Module):
    """BL's ``ApproachNet``: objectness logits and view scores of each seed.

    conv(C→C)+BN+ReLU, conv(C→2+V)+BN+ReLU, conv(2+V→2+V); the first two outputs are the
    objectness logits, the rest the view scores. The chosen (top) view is the argmax of the
    predicted view scores, in training and at inference.

    Args:
        in_channels: C of the seed features (256).
        num_views: V (300).

    Shapes:
        - seed_features: (B, C, Ns)
        - returns objectness (B, 2, Ns) and view_scores (B, Ns, V)
    """

    def __init__(self, in_channels: int = 256, num_views: int = 300):
        super().__init__()
        self.num_views = num_views
        self.layers = nn.Sequential(*_conv_bn_relu(in_channels, in_channels),
                                    *_conv_bn_relu(in_channels, 2 + num_views),
                                    nn.Conv1d(2 + num_views, 2 + num_views, 1))

    def forward(self, seed_features: Tensor) -> Tuple[Tensor, Tensor]:
        out = self.layers(seed_features)
        return out[:, :2], out[:, 2:].transpose(1, 2).contiguous()

    @staticmethod
    def choose_views(view_scores: Tensor) -> Tensor:
        """(B, Ns) top template view per seed: the argmax of the predicted scores."""
        return view_scores.argmax(dim=-1)

    def view_rotations(self, top_view: Tensor) -> Tensor:
        """(B, Ns, 3, 3) gripper rotation approaching along the chosen template view (angle 0)."""
        views = generate_grasp_views(self.num_views, top_view.device)[top_view]
        return approach_to_matrix(-views, torch.zeros_like(views[..., 0]))

    def approaches(self, top_view: Tensor) -> Tensor:
        """(B, Ns, 3) approach vector (−view) of the chosen template view."""
        return -generate_grasp_views(self.num_views, top_view.device)[top_view]


@MODELS.register_module()
class DepthCloudCrop(nn.Module):
    """BL's ``CloudCrop``: for each depth class a cylinder crop of the scene points around each
    centre, in the centre's gripper frame, then a shared MLP and a max over the samples.

    A point q is in the crop of depth d when, with x̂ = Rᵀ(q − c), hmin < x̂₀ < hmax_d and
    x̂₁² + x̂₂² < radius²; the first ``nsample`` such points in index order are taken (padded
    with the first; a crop with none holds point 0). Their rotated offsets x̂ (not divided by
    the radius) feed the MLP.

    Args:
        num_depths: D; ``hmax`` defaults to (d + 1)·0.01 for d < D.
        radius: 0.05 m; hmin: −0.02 m; hmax: one upper height per depth (0.01 … 0.04).
        nsample: points per crop (64).
        channels: shared MLP output channels ((64, 128, 256)), 3 in.

    Shapes:
        - centres: (B, Ns, 3) crop centres (matched label points in training, seeds at test)
        - points: (B, N, 3) scene points
        - rotations: (B, Ns, 3, 3) gripper frames (columns: approach, closing, height axes)
        - seed_features: ignored (the signature is shared with :class:`MultiScaleCloudCrop`)
        - returns (B, channels[-1], Ns, D)
    """

    def __init__(self, num_depths: int = 4, radius: float = 0.05, hmin: float = -0.02,
                 hmax: Optional[Sequence[float]] = None, nsample: int = 64,
                 channels: Sequence[int] = (64, 128, 256)):
        super().__init__()
        self.hmax = tuple(hmax) if hmax is not None else depth_hmax(num_depths)
        if len(self.hmax) != num_depths:
            raise ValueError(f'DepthCloudCrop: {len(self.hmax)} hmax values for {num_depths} '
                             f'depths')
        self.radius, self.hmin, self.nsample = radius, hmin, nsample
        layers, width = [], 3
        for out in channels:
            layers += [nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out),
                       nn.ReLU(inplace=True)]
            width = out
        self.mlp = nn.Sequential(*layers)
        self.out_channels = width

    def query(self, centres: Tensor, points: Tensor, rotations: Tensor) -> Tensor:
        """(D, B, Ns, nsample) indices of the crops' points."""
        return cylinder_queries(points, centres, rotations, (self.radius, ), self.hmin,
                                self.hmax, self.nsample)[0]

    def group(self, centres: Tensor, points: Tensor, rotations: Tensor,
              idx: Optional[Tensor] = None) -> Tensor:
        """(B, 3, Ns, D, nsample) crop offsets in the gripper frames."""
        if idx is None:
            idx = self.query(centres, points, rotations)
        D, B, Ns, k = idx.shape
        flat = idx.permute(1, 2, 0, 3).reshape(B, Ns, D * k)
        offsets = group_points(points.transpose(1, 2).contiguous(), flat) \
            - centres.transpose(1, 2)[..., None]
        local = torch.einsum('bins,bnij->bjns', offsets, rotations)  # Rᵀ(q − c)
        return local.reshape(B, 3, Ns, D, k)

    def embed(self, grouped: Tensor) -> Tensor:
        """(B, 3, Ns, D, k) crop offsets -> (B, C, Ns, D)."""
        B, _, Ns, D, k = grouped.shape
        features = self.mlp(grouped.reshape(B, 3, Ns * D, k)).amax(dim=3)
        return features.view(B, -1, Ns, D)

    def forward(self, centres: Tensor, points: Tensor, rotations: Tensor,
                seed_features: Optional[Tensor] = None) -> Tensor:
        return self.embed(self.group(centres, points, rotations))


@MODELS.register_module()
class MultiScaleCloudCrop(nn.Module):
    """Scale-Balanced-Grasp's multi-scale cylinder crop (``GraspNet_MSCQ``): per-depth crops
    at radii 0.25/0.5/0.75/1.0·radius (each with its own MLP), concatenated and fused by a 1×1
    conv, plus the seed features gated by a sigmoid (conv + sigmoid, times the features) added
    at every depth.

    Args:
        in_channels: C of the seed features (256); must equal ``channels[-1]`` (they are added).
        num_depths, hmin, hmax, nsample, channels: as :class:`DepthCloudCrop`.
        radius: 0.08 m.
        radius_scales: (0.25, 0.5, 0.75, 1.0).

    Shapes:
        - centres (B, Ns, 3), points (B, N, 3), rotations (B, Ns, 3, 3), seed_features (B, C, Ns)
        - returns (B, C, Ns, D)
    """

    def __init__(self, in_channels: int = 256, num_depths: int = 4, radius: float = 0.08,
                 radius_scales: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                 hmin: float = -0.02, hmax: Optional[Sequence[float]] = None,
                 nsample: int = 64, channels: Sequence[int] = (64, 128, 256)):
        super().__init__()
        if channels[-1] != in_channels:
            raise ValueError(f'MultiScaleCloudCrop: crop features ({channels[-1]}) and seed '
                             f'features ({in_channels}) are added and need equal channels')
        self.crops = nn.ModuleList(
            DepthCloudCrop(num_depths, radius * s, hmin, hmax, nsample, channels)
            for s in radius_scales)
        self.fuse = nn.Conv1d(channels[-1] * len(radius_scales), channels[-1], 1)
        self.gate = nn.Sequential(nn.Conv1d(in_channels, in_channels, 1), nn.Sigmoid())
        self.out_channels = channels[-1]

    @staticmethod
    def group(centres: Tensor, points: Tensor, rotations: Tensor, idx: Tensor) -> Tensor:
        """(R, B, 3, Ns, D, k) crop offsets in the gripper frames of every radius's crops
        ``idx`` (R, D, B, Ns, k): :meth:`DepthCloudCrop.group` of all radii in one gather and
        one rotation, with the same arithmetic per offset."""
        R, D, B, Ns, k = idx.shape
        flat = idx.permute(2, 0, 3, 1, 4).reshape(B, R * Ns * D * k)
        offsets = group_points(points.transpose(1, 2).contiguous(), flat).view(
            B, 3, R, Ns, D * k) - centres.transpose(1, 2)[:, :, None, :, None]
        local = torch.einsum('birns,bnij->rbjns', offsets, rotations)  # Rᵀ(q − c)
        return local.contiguous().view(R, B, 3, Ns, D, k)

    def forward(self, centres: Tensor, points: Tensor, rotations: Tensor,
                seed_features: Optional[Tensor] = None) -> Tensor:
        if seed_features is None:
            raise ValueError('MultiScaleCloudCrop needs the seed features')
        first = self.crops[0]
        idx = cylinder_queries(points, centres, rotations, [c.radius for c in self.crops],
                               first.hmin, first.hmax, first.nsample)
        crops = torch.cat([self._embed(crop, local) for crop, local in
                           zip(self.crops, self.group(centres, points, rotations, idx))], dim=1)
        B, C, Ns, D = crops.shape
        fused = self.fuse(crops.view(B, C, Ns * D)).view(B, -1, Ns, D)
        gated = self.gate(seed_features) * seed_features
        return fused + gated[..., None]

    def _embed(self, crop: DepthCloudCrop, local: Tensor) -> Tensor:
        """``crop.embed(local)``; in training its MLP's activations (each layer's conv and ReLU
        outputs: 896 floats a sampled point at the shipped widths, 1.75 GiB a radius at paper
        size) are not kept but recomputed, one radius at a time, in the backward pass: the
        same ops on the same inputs, so the same values and gradients."""
        if not (self.training and torch.is_grad_enabled()):
            return crop.embed(local)
        return recomputed(crop.embed, local, context=partial(scratch_running_stats, crop))


class _DepthHead(nn.Module):
    """conv(C→H)+BN+ReLU, conv(H→H)+BN+ReLU, conv(H→out) over every (seed, depth)."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int):
        super().__init__()
        self.layers = nn.Sequential(*_conv_bn_relu(in_channels, hidden),
                                    *_conv_bn_relu(hidden, hidden),
                                    nn.Conv1d(hidden, out_channels, 1))

    def _run(self, features: Tensor) -> Tensor:
        B, C, Ns, D = features.shape
        return self.layers(features.reshape(B, C, Ns * D)).view(B, -1, Ns, D)


@MODELS.register_module()
class OperationNet(_DepthHead):
    """BL's ``OperationNet``: grasp score, in-plane angle class logits and width per depth.

    Args:
        in_channels: crop feature channels (256); hidden: 128; num_angles: A (12).

    Shapes:
        - features: (B, C, Ns, D)
        - returns score (B, A, Ns, D), angle logits (B, A, Ns, D), width (B, A, Ns, D) metres
    """

    def __init__(self, in_channels: int = 256, hidden: int = 128, num_angles: int = 12):
        super().__init__(in_channels, hidden, 3 * num_angles)
        self.num_angles = num_angles

    def forward(self, features: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        out = self._run(features)
        A = self.num_angles
        return out[:, :A], out[:, A:2 * A], out[:, 2 * A:]


@MODELS.register_module()
class ToleranceNet(_DepthHead):
    """BL's ``ToleranceNet``: grasp tolerance (metres) per angle and depth.

    Args:
        in_channels: 256; hidden: 128; num_angles: A (12).

    Shapes: features (B, C, Ns, D) -> (B, A, Ns, D).
    """

    def __init__(self, in_channels: int = 256, hidden: int = 128, num_angles: int = 12):
        super().__init__(in_channels, hidden, num_angles)

    def forward(self, features: Tensor) -> Tensor:
        return self._run(features)
