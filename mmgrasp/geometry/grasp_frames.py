"""Grasp geometry shared by assigners, heads and decoders: template views and rotations.

The 300 template views are a Fibonacci lattice on the unit sphere; a view vector points from
the grasp point toward the viewpoint, so the approach direction is ``-view``. The gripper frame
is x = approach, y = closing (width) axis, z = height.
"""
import math

import torch
from torch import Tensor

from .gripper import GRASPNET_GRIPPER

GRASP_MAX_WIDTH = GRASPNET_GRIPPER.max_width  # the default gripper's (mmgrasp.geometry.gripper)
GRASP_HEIGHT = GRASPNET_GRIPPER.height


def generate_grasp_views(num_views: int = 300, device=None) -> Tensor:
    """(V, 3) float32 unit vectors: z_i = (2i+1)/V − 1, azimuth 2π·i·φ, φ = (√5 − 1)/2."""
    phi = (math.sqrt(5) - 1) / 2
    i = torch.arange(num_views, dtype=torch.float64, device=device)
    z = (2 * i + 1) / num_views - 1
    r = torch.sqrt(1 - z ** 2)
    xy = 2 * math.pi * i * phi
    return torch.stack([r * torch.cos(xy), r * torch.sin(xy), z], dim=-1).float()


def approach_to_matrix(approach: Tensor, angle: Tensor) -> Tensor:
    """Rotation matrices (..., 3, 3) of grasps approaching along ``approach`` (..., 3) with an
    in-plane rotation ``angle`` (...) about the approach axis.

    Axes: x = normalised approach; y = normalise(−x_y, x_x, 0), or (0, 1, 0) when that is
    degenerate; z = x × y; R = [x y z] · Rx(angle).
    """
    x = approach / approach.norm(dim=-1, keepdim=True)
    y = torch.stack([-x[..., 1], x[..., 0], torch.zeros_like(x[..., 0])], dim=-1)
    degenerate = y.norm(dim=-1) == 0
    y = torch.where(degenerate[..., None], torch.tensor([0., 1., 0.], dtype=x.dtype,
                                                        device=x.device), y)
    y = y / y.norm(dim=-1, keepdim=True)
    z = torch.cross(x, y, dim=-1)
    c, s = torch.cos(angle), torch.sin(angle)
    one, zero = torch.ones_like(c), torch.zeros_like(c)
    rx = torch.stack([one, zero, zero, zero, c, -s, zero, s, c], dim=-1).view(*c.shape, 3, 3)
    return torch.stack([x, y, z], dim=-1) @ rx
