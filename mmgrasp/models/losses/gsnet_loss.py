"""GSNet's losses (graspness_implementation models/loss.py)."""
from typing import Dict

import torch
from torch import Tensor
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from mmgrasp.structures.matched_labels import MatchedLabels


@MODELS.register_module()
class GSNetLoss:
    """obj + 10·graspness + 100·view + 15·score + 10·width, each term reported on its own.

    - objectness: cross-entropy over all points;
    - graspness: smooth-L1 where the objectness label is 1;
    - view: smooth-L1 of the view scores against the view graspness, mean over (B, Ns, V);
    - score: smooth-L1 against the normalised score at the chosen view, mean over (B, Ns, A, D);
    - width: smooth-L1 against 10·width where the score target is positive.

    Degenerate batches stay finite: a masked mean over an empty mask (no point on an object,
    no positive score target) is 0 with a zero gradient, where GSNet's ``loss[mask].mean()``
    would give NaN; the unmasked terms are means over non-empty tensors. The masked means are
    sums over the mask divided by its count on the device (no host sync).
    """

    def __init__(self, objectness: float = 1.0, graspness: float = 10.0, view: float = 100.0,
                 score: float = 15.0, width: float = 10.0):
        self.weights = dict(objectness=objectness, graspness=graspness, view=view, score=score,
                            width=width)

    def __call__(self, objectness_logits: Tensor, graspness_pred: Tensor,
                 objectness_label: Tensor, graspness_label: Tensor, view_scores: Tensor,
                 score_pred: Tensor, width_pred: Tensor, matched: MatchedLabels
                 ) -> Dict[str, Tensor]:
        objectness = F.cross_entropy(objectness_logits, objectness_label)
        on_object = objectness_label.bool()
        graspness = F.smooth_l1_loss(graspness_pred, graspness_label, reduction='none')
        graspness = mean_where(graspness, on_object)
        view = F.smooth_l1_loss(view_scores, matched.view_graspness)
        score = F.smooth_l1_loss(score_pred, matched.top_scores)
        width = F.smooth_l1_loss(width_pred, matched.top_widths * 10, reduction='none')
        positive = matched.top_scores > 0
        width = mean_where(width, positive)
        terms = dict(objectness=objectness, graspness=graspness, view=view, score=score,
                     width=width)
        return {f'loss_{k}': self.weights[k] * v for k, v in terms.items()}


def mean_where(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` where ``mask``; 0 (with a zero gradient) on an empty mask. On the
    device: no ``values[mask]`` (a nonzero, and another in its backward), no test of the mask."""
    return torch.where(mask, values, 0.0).sum() / mask.sum().clamp(min=1)
