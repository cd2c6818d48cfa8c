"""GSNet's heads: graspable points, approach views, cylinder crops, score and width."""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from mmgrasp.ops.point_ops import cylinder_query, group_points
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views


@MODELS.register_module()
class GraspableHead(nn.Module):
    """Per-point objectness (2 logits) and graspness (1) from backbone features (B, C, N)."""

    def __init__(self, in_channels: int = 512):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, 3, 1)

    def forward(self, features: Tensor) -> Tuple[Tensor, Tensor]:
        out = self.conv(features)
        return out[:, :2], out[:, 2]


@MODELS.register_module()
class ApproachHead(nn.Module):
    """View scores (B, Ns, V) of each seed and a residual feature added to the seed features.

    The chosen view is drawn in training (as ``torch.multinomial`` draws one sample, on the
    per-seed min–max normalised, detached scores, with the batch's generator) and the argmax
    at inference.
    """

    def __init__(self, in_channels: int = 512, num_views: int = 300):
        super().__init__()
        self.num_views = num_views
        self.conv1 = nn.Conv1d(in_channels, in_channels, 1)
        self.conv2 = nn.Conv1d(in_channels, num_views, 1)

    def forward(self, features: Tensor) -> Tuple[Tensor, Tensor]:
        residual = F.relu(self.conv1(features))
        return self.conv2(residual).transpose(1, 2).contiguous(), residual

    @staticmethod
    def choose_views(view_scores: Tensor, generator: Optional[torch.Generator]) -> Tensor:
        """(B, Ns) chosen template view per seed: drawn when ``generator`` is given, else argmax."""
        if generator is None:
            return view_scores.argmax(dim=-1)
        scores = view_scores.detach()
        low = scores.amin(dim=-1, keepdim=True)
        high = scores.amax(dim=-1, keepdim=True)
        weights = (scores - low) / (high - low + 1e-8)
        flat = weights.reshape(-1, weights.shape[-1])
        flat = torch.where(flat.sum(-1, keepdim=True) > 0, flat, 1.0)
        # torch.multinomial(flat, 1, generator=generator) draws exactly this (argmax of p / q,
        # q ~ Exp(1): its one-sample path on every device) after checking p on the host (an
        # item() on the CPU); p here is in [0, 1] with a positive sum by construction
        q = torch.empty_like(flat).exponential_(1, generator=generator)
        return (flat / q).argmax(dim=-1).view(scores.shape[:2])

    def view_rotations(self, top_view: Tensor) -> Tensor:
        """(B, Ns, 3, 3) gripper rotation approaching along the chosen template view."""
        views = generate_grasp_views(self.num_views, top_view.device)[top_view]
        return approach_to_matrix(-views, torch.zeros_like(views[..., 0]))


@MODELS.register_module()
class CloudCrop(nn.Module):
    """Cylinder crops among the seeds around each seed, along its grasp frame; shared MLP and
    max pooling give one feature per seed (B, out_channels, Ns)."""

    def __init__(self, in_channels: int = 512, channels: Tuple[int, ...] = (256, 256),
                 radius: float = 0.05, hmin: float = -0.02, hmax: float = 0.04,
                 nsample: int = 16):
        super().__init__()
        self.radius, self.hmin, self.hmax, self.nsample = radius, hmin, hmax, nsample
        layers, width = [], in_channels + 3
        for out in channels:
            layers += [nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            width = out
        self.mlp = nn.Sequential(*layers)
        self.out_channels = width

    def forward(self, seeds: Tensor, features: Tensor, rotations: Tensor) -> Tensor:
        return self.mlp(self.group(seeds, features, rotations)).amax(dim=3)

    def group(self, seeds: Tensor, features: Tensor, rotations: Tensor) -> Tensor:
        """(B, 3 + C, Ns, nsample): local coordinates in the grasp frame over the radius, then
        the features of the grouped seeds (EconomicGrasp's crop groups the same way)."""
        idx = cylinder_query(self.radius, self.hmin, self.hmax, self.nsample, seeds, seeds,
                             rotations)
        grouped_xyz = group_points(seeds.transpose(1, 2).contiguous(), idx)  # (B, 3, Ns, k)
        local = grouped_xyz - seeds.transpose(1, 2)[..., None]
        local = torch.einsum('bins,bnij->bjns', local, rotations) / self.radius  # Rᵀ(q − c)
        return torch.cat([local, group_points(features, idx)], dim=1)


@MODELS.register_module()
class SWADHead(nn.Module):
    """Score and width (B, Ns, A, D) per seed from its crop feature."""

    def __init__(self, in_channels: int = 256, num_angles: int = 12, num_depths: int = 4):
        super().__init__()
        self.num_angles, self.num_depths = num_angles, num_depths
        self.conv1 = nn.Conv1d(in_channels, in_channels, 1)
        self.conv2 = nn.Conv1d(in_channels, 2 * num_angles * num_depths, 1)

    def forward(self, features: Tensor) -> Tuple[Tensor, Tensor]:
        out = self.conv2(F.relu(self.conv1(features)))
        B, _, Ns = out.shape
        out = out.view(B, 2, self.num_angles, self.num_depths, Ns).permute(0, 1, 4, 2, 3)
        return out[:, 0], out[:, 1]
