"""HGGD's grasp heatmap network (``AnchorGraspNet``, "GHM" in the paper; THU-VCLab/HGGD
``models/anchornet.py``, ``models/resnet_model.py``).

A ResNet-34 layout (BasicBlock × [3, 4, 6, 3], LeakyReLU, 8 planes: 8 / 16 / 32 / 64 / 128
channels at strides 2…32), a decoder of five ConvTranspose2d(k4, s2) + BN + ReLU layers
(64, 32, 16, 8, 8 channels; the first two with padding (1, 2) and output padding (0, 1), so a
640×360 input comes back through 20×12 → 40×23 → 80×45) and the heads. Each decoder layer adds
its skip *before* it runs (``x = layer(x + skip)``), so the first one sees twice the deepest
feature map. At the 80×45 level (stride 8) the class / θ / depth / width heads predict six
in-plane anchors per cell, and the same map, detached, is the feature map of the 3-D stage; the
heatmap head works at full resolution.

Modules carry the reference's names and are built in its order (the decoder's list before the
backbone), so that its state dict and the one of its published weights are this module's,
key for key, and a seeded construction draws its initial weights in the same order.
Image tensors are x-major, (B, C, W, H), as the reference's transposed images.
"""
import math
from typing import Dict, List

from torch import Tensor, nn

from mmgrasp.registry import MODELS

#: The heads sit at stride 8 (the reference's ``ratio``; fixed by its 640×360 decoder).
HEAD_STRIDE = 8


class BasicBlock(nn.Module):
    """ResNet's basic block with LeakyReLU; a 1×1 conv shortcut where the shape changes."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False),
            nn.BatchNorm2d(out_channels), nn.LeakyReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(out_channels))
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels))
        self.act = nn.LeakyReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.residual_function(x) + self.shortcut(x))


class ResNetEncoder(nn.Module):
    """Stem (7×7, stride 2) and four stages of stride 2; returns the five stage outputs."""

    def __init__(self, in_channels: int, planes: int, blocks=(3, 4, 6, 3)):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, planes, 7, 2, 3, bias=False),
                                   nn.BatchNorm2d(planes), nn.LeakyReLU(inplace=True))
        channels = planes
        for stage, count in enumerate(blocks):
            out = planes * 2 ** (stage + 1)
            layers = [BasicBlock(channels if i == 0 else out, out, 2 if i == 0 else 1)
                      for i in range(count)]
            self.add_module(f'conv{stage + 2}_x', nn.Sequential(*layers))
            channels = out
        self.out_channels = channels

    def forward(self, x: Tensor) -> List[Tensor]:
        outs = [self.conv1(x)]
        for stage in range(2, 6):
            outs.append(getattr(self, f'conv{stage}_x')(outs[-1]))
        return outs


class _Backbone(nn.Module):
    """Holds the encoder as ``net`` (the reference's ``Backbone`` wrapper, for its key names)."""

    def __init__(self, in_channels: int, planes: int):
        super().__init__()
        self.net = ResNetEncoder(in_channels, planes)


class _UpBlock(nn.Module):
    """ConvTranspose2d(k4, s2, no bias) + BN + ReLU, as ``deconv``."""

    def __init__(self, in_channels: int, out_channels: int, padding=1, output_padding=0):
        super().__init__()
        self.deconv = nn.Sequential(
            nn.ConvTranspose2d(in_channels, out_channels, 4, 2, padding, output_padding,
                               bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.deconv(x)


class _ConvBNReLU(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel, 1, (kernel - 1) // 2, bias=True),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)


def _head(in_channels: int, mid_channels: int, out_channels: int) -> nn.Sequential:
    """Conv5×5 + BN + ReLU, then a 1×1 conv (both with bias)."""
    return nn.Sequential(_ConvBNReLU(in_channels, mid_channels, 5),
                         nn.Conv2d(mid_channels, out_channels, 1, bias=True))


@MODELS.register_module()
class AnchorGraspNet(nn.Module):
    """RGB-D image (B, in_channels, W, H) -> grasp heatmap logits and per-cell anchor maps.

    Args:
        in_channels: input channels (4: normalised depth and RGB).
        num_theta_anchors: in-plane angle anchors per cell (6 classes of 30°).
        mid_channels: channels inside each head (32).

    The input's W must be a multiple of 32 and H/8 an odd number m with (m + 1) / 2 odd
    (360 -> 45 -> 23: the decoder's (1, 2) padding gives back 2n - 1 along H).
    """

    planes = 8  # the reference's feature_dim 128 // 16
    decoder_channels = (64, 32, 16, 8, 8)

    def __init__(self, in_channels: int = 4, num_theta_anchors: int = 6, mid_channels: int = 32):
        super().__init__()
        self.num_theta_anchors = num_theta_anchors
        self.trconv = nn.ModuleList()
        self.backbone = _Backbone(in_channels, self.planes)
        channels = self.backbone.net.out_channels
        for i, out in enumerate(self.decoder_channels):
            odd = dict(padding=(1, 2), output_padding=(0, 1)) if i < 2 else {}
            self.trconv.append(_UpBlock(channels, out, **odd))
            channels = out
        head_channels = self.decoder_channels[1]
        self.hmap = _head(self.decoder_channels[-1], mid_channels, 1)
        self.cls_mask_conv = _head(head_channels, mid_channels, num_theta_anchors)
        self.theta_offset_conv = _head(head_channels, mid_channels, num_theta_anchors)
        self.width_offset_conv = _head(head_channels, mid_channels, num_theta_anchors)
        self.depth_offset_conv = _head(head_channels, mid_channels, num_theta_anchors)
        self.feature_channels = head_channels
        for m in self.modules():
            if isinstance(m, nn.Conv2d):  # ConvTranspose2d keeps PyTorch's default
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, images: Tensor) -> Dict[str, Tensor]:
        """``loc_map`` (B, 1, W, H) heatmap logits; ``cls_mask``, ``theta_offset``,
        ``depth_offset``, ``width_offset`` (B, K, W/8, H/8); ``features`` (B, 32, W/8, H/8),
        detached (no gradient reaches this network from the 3-D stage)."""
        skips = self.backbone.net(images)
        x = skips[-1]
        out = {}
        for i, layer in enumerate(self.trconv):
            x = layer(x + skips[len(skips) - 1 - i])
            if i == 1:  # stride 8
                out['cls_mask'] = self.cls_mask_conv(x)
                out['theta_offset'] = self.theta_offset_conv(x)
                out['width_offset'] = self.width_offset_conv(x)
                out['depth_offset'] = self.depth_offset_conv(x)
                out['features'] = x.detach()
        out['loc_map'] = self.hmap(x)
        return out


def check_image_size(width: int, height: int) -> None:
    """Raise where AnchorGraspNet's decoder cannot give back an image of this size."""
    cells = height // HEAD_STRIDE
    if width % 32 or height % HEAD_STRIDE or cells % 2 == 0 or ((cells + 1) // 2) % 2 == 0:
        raise ValueError(f'AnchorGraspNet needs images (W, H) with W a multiple of 32 and H/8 '
                         f'odd with (H/8 + 1)/2 odd (640 x 360 is the reference size), got '
                         f'{width} x {height}')

