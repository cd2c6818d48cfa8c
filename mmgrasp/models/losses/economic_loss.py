"""EconomicGrasp's losses (iSEE-Laboratory/EconomicGrasp ``models/loss_economicgrasp.py``
@7361bb6, weights of ``utils/arguments.py``)."""
from typing import Dict

import torch
from torch import Tensor
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from .gsnet_loss import mean_where


@MODELS.register_module()
class EconomicGraspLoss:
    """obj + 10·graspness + 100·view + angle + depth + score + 10·width, each term reported.

    - objectness: cross-entropy over all points;
    - graspness: smooth-L1 where the objectness label is 1;
    - view: smooth-L1 of the view scores against the matched view graspness, mean over
      (B, Ns, V);
    - angle, depth: cross-entropy against the class of the chosen view's best grasp;
    - score: cross-entropy over 6 classes, label ``long(score · 10 / 2)`` (truncation, in the
      reference's order of float32 operations);
    - width: smooth-L1 of the width output against 10·width.

    The last four are means over ``batch_valid_mask`` (the seed's nearest label point within
    5 mm and its chosen view among the point's stored views).

    Degenerate batches stay finite: a masked mean over an empty mask is 0 with a zero gradient
    (the reference gives ``0 · sum(loss)`` there for the last four, and NaN for graspness
    without object points); computed on the device, no host sync.

    ``targets`` holds the label assigner's outputs under the reference names
    (``batch_grasp_view_graspness``, ``batch_grasp_rotations``, ``batch_grasp_depth``,
    ``batch_grasp_score``, ``batch_grasp_width``, ``batch_valid_mask``).
    """

    def __init__(self, objectness: float = 1.0, graspness: float = 10.0, view: float = 100.0,
                 angle: float = 1.0, depth: float = 1.0, score: float = 1.0,
                 width: float = 10.0):
        self.weights = dict(objectness=objectness, graspness=graspness, view=view, angle=angle,
                            depth=depth, score=score, width=width)
        self._vectors: Dict[tuple, Tensor] = {}

    def _weight_vector(self, names: tuple, like: Tensor) -> Tensor:
        """The weights of ``names`` on ``like``'s device and dtype, made once per device (no
        host-to-device copy per iteration)."""
        key = (names, like.device, like.dtype)
        if key not in self._vectors:
            self._vectors[key] = torch.tensor([self.weights[k] for k in names],
                                              dtype=like.dtype, device=like.device)
        return self._vectors[key]

    def __call__(self, objectness_logits: Tensor, graspness_pred: Tensor,
                 objectness_label: Tensor, graspness_label: Tensor, view_scores: Tensor,
                 grasp_pred: Dict[str, Tensor], targets: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """``grasp_pred``: the grasp head's angle (B, A + 1, Ns), depth (B, D + 1, Ns),
        score (B, 6, Ns) logits and width (B, Ns)."""
        objectness = F.cross_entropy(objectness_logits, objectness_label)
        graspness = F.smooth_l1_loss(graspness_pred, graspness_label, reduction='none')
        graspness = mean_where(graspness, objectness_label.bool())
        view = F.smooth_l1_loss(view_scores, targets['batch_grasp_view_graspness'])
        valid = targets['batch_valid_mask']
        count = valid.sum().clamp(min=1)  # mean_where's divisor, once for the four terms
        score_label = (targets['batch_grasp_score'] * 10 / 2).long()
        per_seed = dict(
            angle=F.cross_entropy(grasp_pred['angle'], targets['batch_grasp_rotations'].long(),
                                  reduction='none'),
            depth=F.cross_entropy(grasp_pred['depth'], targets['batch_grasp_depth'].long(),
                                  reduction='none'),
            score=F.cross_entropy(grasp_pred['score'], score_label, reduction='none'),
            width=F.smooth_l1_loss(grasp_pred['width'], targets['batch_grasp_width'] * 10,
                                   reduction='none'))
        # the four masked means as one: stacked, masked, summed per term, divided by the count
        masked = torch.where(valid, torch.stack(list(per_seed.values())), 0.0).sum((1, 2))
        terms = dict(objectness=objectness, graspness=graspness, view=view,
                     **dict(zip(per_seed, (masked / count).unbind())))
        # weighted as one product (the same values as one product per term, 1 launch not 7)
        weighted = torch.stack(list(terms.values())) * self._weight_vector(tuple(terms), objectness)
        return {f'loss_{k}': v for k, v in zip(terms, weighted.unbind())}
