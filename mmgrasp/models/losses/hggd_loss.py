"""HGGD's losses as its training script runs them (THU-VCLab/HGGD ``models/losses.py``,
``dataset/pc_dataset_tools.py`` ``get_center_group_label``, ``train_graspnet.py``).

2-D: a focal loss on the heatmap (positives: target ≥ 0.99, α 0.5, negatives weighted by
(1 − t)⁴), a focal loss on the θ-anchor classes (positives ≥ 0.5, α 0.25: two labels in a cell
and anchor), and smooth-L1 on the θ / depth / width offsets, clamped to ±0.5 inside the loss,
where a cell and anchor has a label. 3-D: each region's labels are the grasps within 2 cm of its
centre (the 500 nearest); anchor (θ, γ_a, β_a) gets the soft label 1 − d to the nearest one,
d = 1 − |q_a · q_l| (the better of the grasp and its flip (θ + π, −γ, −β)), q the quaternion of
the intrinsic XYZ Euler angles; a 49-way focal loss (positives ≥ 0.99) and smooth-L1 offsets to
that label's centre (÷ 0.02 m) where the soft label exceeds 0.99. Weights: loc 1, reg 5, cls 1,
offset 1 (``train_graspnet.sh``); the sum of the terms is the loss.

No term synchronises with the host: a focal loss with no positive divides by 1 (the
reference's ``if num_pos == 0`` branch, as a clamp).
"""
import math
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from mmgrasp.registry import MODELS

EPS = 1e-6


def focal_loss(logits: Tensor, targets: Tensor, thres: float = 0.99, alpha: float = 0.5,
               gamma: float = 2.0, neg_suppress: bool = False) -> Tensor:
    """−[Σ α log p (1 − p)^γ [t ≥ thres] + Σ (1 − α) log(1 − p) p^γ [t < thres] s] / N_pos,
    p = clamp(sigmoid(x), 1e-6, 1 − 1e-6), s = (1 − t)⁴ with ``neg_suppress`` (else 1),
    N_pos the number of positives (1 when there are none)."""
    p = torch.sigmoid(logits).clamp(EPS, 1 - EPS)
    pos = targets.ge(thres).to(p.dtype)
    neg = targets.lt(thres).to(p.dtype)
    pos_loss = alpha * torch.log(p) * torch.pow(1 - p, gamma) * pos
    neg_loss = (1 - alpha) * torch.log(1 - p) * torch.pow(p, gamma) * neg
    if neg_suppress:
        neg_loss = neg_loss * torch.pow(1 - targets, 4)
    return -(pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp(min=1)


def offset_loss(preds: List[Tensor], targets: List[Tensor], cls_mask: Tensor) -> Tensor:
    """Mean over the offsets of smooth-L1 (sum) of clamp(pred, ±0.5)·m against target·m,
    divided by Σm + 1e-6, m = [cls_mask > 0]."""
    mask = (cls_mask > 0).to(preds[0].dtype)
    count = mask.sum() + EPS
    terms = [F.smooth_l1_loss(p.clamp(-0.5, 0.5) * mask, t * mask, reduction='sum') / count
             for p, t in zip(preds, targets)]
    return torch.stack(terms).sum() / len(terms)


def quaternions_xyz(euler: Tensor) -> Tensor:
    """(..., 3) intrinsic XYZ Euler angles -> (..., 4) quaternions (w, x, y, z): qx ⊗ qy ⊗ qz."""
    half = euler / 2
    c, s = torch.cos(half), torch.sin(half)
    cx, cy, cz = c.unbind(-1)
    sx, sy, sz = s.unbind(-1)
    # qx ⊗ qy = (cx cy, sx cy, cx sy, sx sy); then ⊗ qz = (cz, 0, 0, sz)
    w, x, y, z = cx * cy, sx * cy, cx * sy, sx * sy
    return torch.stack([w * cz - z * sz, x * cz + y * sz, -x * sz + y * cz, z * cz + w * sz], -1)


def match_labels(centers: Tensor, frame: Tensor, labels: Tensor, label_frame_counts: List[int],
                 radius: float = 0.02, max_labels: int = 500) -> Tuple[Tensor, Tensor]:
    """``get_center_group_label``: for each centre (C, 3) float64, the indices (C, K) of its
    frame's labels within ``radius``, nearest first (at most ``max_labels``; K = min of that
    and the most labels a frame has), and which of them are real (C, K) bool.

    ``labels`` (B, L, 3) float32: label centres per frame, padded; ``label_frame_counts`` the
    real number per frame. Equal distances: the lower label index first."""
    L = labels.shape[1]
    k = min(max_labels, L)
    if k == 0:
        empty = torch.zeros(len(centers), 0, dtype=torch.long, device=centers.device)
        return empty, empty.bool()
    counts = torch.as_tensor(label_frame_counts, device=centers.device)
    real = torch.arange(L, device=centers.device)[None] < counts[frame][:, None]
    d2 = 0
    for axis in range(3):
        d2 = d2 + (labels[frame, :, axis].double() - centers[:, axis, None]) ** 2
    distance = torch.where(real, torch.sqrt(d2), float('inf'))
    nearest = torch.sort(distance, dim=1, stable=True)
    return nearest.indices[:, :k], nearest.values[:, :k] < radius


def local_labels(thetas: Tensor, anchor_eulers: Tensor, label_eulers: Tensor,
                 label_offsets: Tensor, valid: Tensor) -> Tuple[Tensor, Tensor]:
    """``faster_get_local_labels``: soft labels (C, A) = 1 − min_l d(anchor, label) and offset
    labels (C, A, 3) = the offset of the first label reaching that minimum, float64.

    ``thetas`` (C,) the regions' 2-D angles; ``anchor_eulers`` (A, 2) the anchors' (γ, β);
    ``label_eulers`` (C, K, 3) (θ, γ, β) and ``label_offsets`` (C, K, 3) of the matched labels,
    ``valid`` (C, K). A region without labels gets zeros."""
    C, A = len(thetas), len(anchor_eulers)
    eulers = torch.cat([thetas.double()[:, None, None].expand(C, A, 1),
                        anchor_eulers.double()[None].expand(C, A, 2)], dim=2)
    flipped = eulers * torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64, device=eulers.device)
    flipped[..., 0] += math.pi
    q_label = quaternions_xyz(label_eulers.double())
    dots = torch.maximum(torch.bmm(quaternions_xyz(eulers), q_label.transpose(1, 2)).abs(),
                         torch.bmm(quaternions_xyz(flipped), q_label.transpose(1, 2)).abs())
    distance = torch.where(valid[:, None, :], 1 - dots, float('inf'))
    if distance.shape[2] == 0:
        zeros = eulers.new_zeros(C, A)
        return zeros, eulers.new_zeros(C, A, 3)
    best, index = distance.min(dim=2)  # the first minimum
    has = valid.any(dim=1)[:, None]
    soft = torch.where(has, 1 - best, 0.0)
    offsets = label_offsets.double().gather(1, index[..., None].expand(-1, -1, 3))
    return soft, torch.where(has[..., None], offsets, 0.0)


@MODELS.register_module()
class HGGDLoss(nn.Module):
    """The 2-D anchor loss and the 3-D multi-anchor loss of HGGD (module docstring).

    Args:
        loc_weight, reg_weight, cls_weight, offset_weight: the reference's ``loc_a``,
            ``reg_b``, ``cls_c``, ``offset_d`` (its training script: 1, 5, 1, 1).
        label_thres: soft labels at or above are positives of the 49-way focal loss (0.99).
        label_radius: labels within this distance of a region's centre are its labels (m).
        max_labels: at most this many, nearest first (500).
    """

    def __init__(self, loc_weight: float = 1.0, reg_weight: float = 5.0,
                 cls_weight: float = 1.0, offset_weight: float = 1.0, label_thres: float = 0.99,
                 label_radius: float = 0.02, max_labels: int = 500):
        super().__init__()
        self.loc_weight, self.reg_weight = loc_weight, reg_weight
        self.cls_weight, self.offset_weight = cls_weight, offset_weight
        self.label_thres, self.label_radius, self.max_labels = label_thres, label_radius, max_labels

    def anchor_losses(self, out: Dict[str, Tensor], targets: Dict[str, Tensor]
                      ) -> Dict[str, Tensor]:
        """``compute_anchor_loss``: loss_loc, loss_reg, loss_cls, each weighted."""
        names = ('theta_offset', 'depth_offset', 'width_offset')
        loc = focal_loss(out['loc_map'], targets['loc_map'], neg_suppress=True)
        cls = focal_loss(out['cls_mask'], targets['cls_mask'], thres=0.5, alpha=0.25)
        reg = offset_loss([out[n] for n in names], [targets[n] for n in names],
                          targets['cls_mask'])
        return dict(loss_loc=self.loc_weight * loc, loss_reg=self.reg_weight * reg,
                    loss_cls=self.cls_weight * cls)

    def local_losses(self, pred: Tensor, offset: Tensor, soft: Tensor, offset_labels: Tensor
                     ) -> Dict[str, Tensor]:
        """``compute_multicls_loss`` after the labels: loss_multi_cls, loss_offset."""
        soft = soft.float()
        multi = focal_loss(pred, soft, thres=self.label_thres)
        mask = (soft > self.label_thres)[..., None].to(offset.dtype)
        target = offset_labels.float() / 0.02
        off = F.smooth_l1_loss(offset * mask, target * mask, reduction='sum') / (mask.sum() + EPS)
        return dict(loss_multi_cls=multi, loss_offset=self.offset_weight * off)
