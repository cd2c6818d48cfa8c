"""HGGD's 6-D decode: the local network's anchor scores and offsets, with the 2-D grasp of each
region, as GraspNet rows (THU-VCLab/HGGD ``dataset/evaluation.py`` ``detect_6d_grasp_multi`` /
``jit_detect_6d``, ``dataset/grasp.py`` ``RectGraspGroup.to_6d_grasp_group``).

The rotation is R0(θ)·Rz(γ)·Ry(β): R0's columns are the camera's z axis, the unit vector to the
rectangle's open point and the unit vector to its upper point, the rectangle (width w, height
20 px, at the principal point) back-projected at the grasp's depth; width and height are those
vectors' lengths, doubled. The arithmetic (the centre's round trip through its pixel, the 1e-8
added to the norms) is the reference's, so its rows come back to the last bits.
"""
import math
from typing import Tuple

import torch
from torch import Tensor

KEY_POINT_EPS = 1e-8


def _back_project(px: Tensor, py: Tensor, z: Tensor, k: Tensor) -> Tensor:
    return torch.stack([z / k[:, 0, 0] * (px - k[:, 0, 2]), z / k[:, 1, 1] * (py - k[:, 1, 2]),
                        z], dim=-1)


def rect_to_rows(center: Tensor, theta: Tensor, gamma: Tensor, beta: Tensor, width_px: Tensor,
                 score: Tensor, intrinsics: Tensor, height_px: float = 20.0,
                 depth: float = 0.02) -> Tensor:
    """(G, 17) float64 GraspNet rows of grasps at camera-frame ``center`` (G, 3) with the
    in-plane angle θ, out-of-plane γ, β (rad), width in full-image px and per-grasp
    ``intrinsics`` (G, 3, 3)."""
    k = intrinsics
    fx, fy, cx, cy = k[:, 0, 0], k[:, 1, 1], k[:, 0, 2], k[:, 1, 2]
    pixel_x = center[:, 0] / center[:, 2] * fx + cx
    pixel_y = center[:, 1] / center[:, 2] * fy + cy
    z = center[:, 2] * 1e3 / 1000
    translation = _back_project(pixel_x, pixel_y, z, k)
    open_x = cx - width_px / 2 * torch.cos(theta)
    open_y = cy + width_px / 2 * torch.sin(theta)
    vx, vy = open_x - cx, open_y - cy
    norm = torch.sqrt(vx * vx + vy * vy)
    ux, uy = vx / norm, vy / norm
    upper_x = -uy * height_px / 2 + cx
    upper_y = ux * height_px / 2 + cy
    middle = _back_project(cx, cy, z, k)
    opens = _back_project(open_x, open_y, z, k) - middle
    uppers = _back_project(upper_x, upper_y, z, k) - middle
    open_norm = torch.linalg.vector_norm(opens, dim=1, keepdim=True)
    upper_norm = torch.linalg.vector_norm(uppers, dim=1, keepdim=True)
    axis = torch.zeros_like(opens)
    axis[:, 2] = 1
    r0 = torch.stack([axis, opens / (open_norm + KEY_POINT_EPS),
                      uppers / (upper_norm + KEY_POINT_EPS)], dim=2)
    cg, sg, cb, sb = torch.cos(gamma), torch.sin(gamma), torch.cos(beta), torch.sin(beta)
    zero, one = torch.zeros_like(gamma), torch.ones_like(gamma)
    rz = torch.stack([cg, -sg, zero, sg, cg, zero, zero, zero, one], 1).view(-1, 3, 3)
    ry = torch.stack([cb, zero, sb, zero, one, zero, -sb, zero, cb], 1).view(-1, 3, 3)
    rotation = torch.einsum('ijk,ikn->ijn', torch.einsum('ijk,ikn->ijn', r0, rz), ry)
    n = len(center)
    return torch.cat([score.double()[:, None], (open_norm * 2), (upper_norm * 2),
                      torch.full((n, 1), depth, dtype=torch.float64, device=center.device),
                      rotation.reshape(n, 9), translation,
                      torch.full((n, 1), -1.0, dtype=torch.float64, device=center.device)], 1)


def decode_grasps(center: Tensor, theta: Tensor, width: Tensor, frame: Tensor, pred: Tensor,
                  offset: Tensor, gamma_anchors: Tensor, beta_anchors: Tensor,
                  intrinsics: Tensor, scale: float, top_k: int = 10,
                  max_gamma: float = math.pi / 3) -> Tuple[Tensor, Tensor]:
    """The ``top_k`` anchors of each region as rows (G, 17) and their frames (G,).

    Per region (``center`` (V, 3) float64, 2-D ``theta``, ``width`` in heatmap px): score
    p = sigmoid(pred); the centre moved by 0.02·clip(offset, ±1) m; γ = γ_a[i % n]·π/2, β =
    β_a[i // n]·π/2 for anchor index i; the width scaled by ``scale`` to full-image px; kept
    where abs(γ) < ``max_gamma``. The heat score is not multiplied in (as the reference)."""
    n = len(gamma_anchors)
    k = min(top_k, pred.shape[1])
    score, index = torch.sigmoid(pred).topk(k, dim=1)
    moved = 0.02 * offset.clamp(-1, 1)
    moved = moved.gather(1, index[..., None].expand(-1, -1, 3))
    centers = (center[:, None] + moved).reshape(-1, 3)
    gamma = (gamma_anchors[index % n] * math.pi / 2).reshape(-1)
    beta = (beta_anchors[torch.div(index, n, rounding_mode='floor')] * math.pi / 2).reshape(-1)

    def repeat(values: Tensor) -> Tensor:
        return values[:, None].expand(-1, k).reshape(-1)

    keep = gamma.abs() < max_gamma
    frames = repeat(frame)[keep]
    rows = rect_to_rows(centers[keep], repeat(theta)[keep], gamma[keep], beta[keep],
                        repeat(width.double() * scale)[keep], score.reshape(-1)[keep],
                        intrinsics[frames])
    return rows, frames
