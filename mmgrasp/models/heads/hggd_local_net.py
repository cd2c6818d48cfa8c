"""HGGD's local grasp network (``PointMultiGraspNet``, "NMG" in the paper; THU-VCLab/HGGD
``models/localgraspnet.py``, ``models/pointnet.py``).

A region of 512 points around a grasp centre, each with its xyz relative to the centre and a
32-channel feature of the image network, goes through a PointNet: a T-net (STN3d) turns the
xyz, conv 3→64 (BN, ReLU), the features are concatenated, conv 96→128 (BN, ReLU), conv
128→1024 (BN, no ReLU), max pool. With the 2-D grasp's (θ, width, depth offset) through a
linear layer it scores the 7×7 (γ, β) anchors and regresses a centre offset for each.

Modules carry the reference's names and are built in its order (its published weights load
unchanged; a seeded construction draws the same initial weights).
"""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS


class STN3d(nn.Module):
    """PointNet's T-net on xyz: (R, 3, N) -> (R, 3, 3), the predicted matrix plus identity."""

    def __init__(self, k: int = 3):
        super().__init__()
        self.conv1 = nn.Conv1d(k, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 1024, 1)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k * k)
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.bn4 = nn.BatchNorm1d(512)
        self.bn5 = nn.BatchNorm1d(256)
        self.k = k

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        # the ReLU after the max pool (the reference pools after it): ReLU is monotone, so the
        # values and the gradients (torch.max's, to one element) are the same, and no
        # (R, 1024, N) ReLU output is kept for the backward pass (1 GiB at paper size)
        x = F.relu(self.bn3(self.conv3(x)).max(dim=2).values)
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x) + torch.eye(self.k, dtype=x.dtype, device=x.device).flatten()
        return x.view(-1, self.k, self.k)


class PointNetFeat(nn.Module):
    """(R, 3 + C, N) -> (R, 1024): the T-net on xyz, then the shared MLP with the features
    joining after the first layer, max-pooled."""

    def __init__(self, xyz_channels: int = 3, feature_channels: int = 32):
        super().__init__()
        self.stn = STN3d(xyz_channels)
        self.conv1 = nn.Conv1d(xyz_channels, 64, 1)
        self.conv2 = nn.Conv1d(64 + feature_channels, 128, 1)
        self.conv3 = nn.Conv1d(128, 1024, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)

    def forward(self, x: Tensor) -> Tensor:
        xyz = x[:, :3]
        turned = torch.bmm(xyz.transpose(2, 1), self.stn(xyz)).transpose(2, 1)
        x_p = F.relu(self.bn1(self.conv1(turned)))
        x = F.relu(self.bn2(self.conv2(torch.cat([x_p, x[:, 3:]], 1))))
        return self.bn3(self.conv3(x)).max(dim=2).values


@MODELS.register_module()
class PointMultiGraspNet(nn.Module):
    """Regions (R, N, 3 + C) and 2-D grasp info (R, info_channels) -> anchor logits (R, A)
    and offsets (R, A, 3).

    Args:
        info_channels: the 2-D grasp's (θ rad, width px at 640, depth offset mm): 3.
        num_anchors: (γ, β) anchor pairs, 7 × 7 = 49.
        feature_channels: channels of the image features carried by each point (32).
    """

    def __init__(self, info_channels: int = 3, num_anchors: int = 49,
                 feature_channels: int = 32):
        super().__init__()
        self.num_anchors = num_anchors
        self.pointnet = PointNetFeat(3, feature_channels)
        self.point_layer = nn.Sequential(nn.Linear(1024, 512), nn.LayerNorm(512),
                                         nn.Dropout(0.3), nn.ReLU(inplace=True))
        self.info_layer = nn.Linear(info_channels, 32)
        self.anchor_mlp = nn.Sequential(nn.Linear(512 + 32, 256), nn.LayerNorm(256),
                                        nn.ReLU(inplace=True), nn.Linear(256, num_anchors))
        self.offset_mlp = nn.Sequential(nn.Linear(512 + 32, 256), nn.LayerNorm(256),
                                        nn.ReLU(inplace=True), nn.Linear(256, num_anchors * 3))
        for m in self.modules():
            if isinstance(m, (nn.LayerNorm, nn.BatchNorm1d)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):  # the T-net's fc3 too: it does not start at identity
                nn.init.kaiming_normal_(m.weight)
                nn.init.constant_(m.bias, 0)

    def forward(self, regions: Tensor, info: Tensor, keep: Optional[Tensor] = None
                ) -> Tuple[Tensor, Tensor]:
        """``keep`` (R, 512): in training, the dropout mask (0 or 1 / (1 − p)) to use instead
        of ``point_layer``'s own draw from the global generator (the detector draws it from
        each frame's generator)."""
        x = self.point_layer[1](self.point_layer[0](self.pointnet(regions.transpose(1, 2))))
        x = x * keep if self.training and keep is not None else self.point_layer[2](x)
        x = torch.cat([self.point_layer[3](x), self.info_layer(info)], 1)
        return self.anchor_mlp(x), self.offset_mlp(x).view(-1, self.num_anchors, 3)

