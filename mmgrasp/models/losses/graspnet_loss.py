"""GraspNet-baseline's and Scale-Balanced-Grasp's losses (BL models/loss.py, SBG models/loss.py).

Predictions use BL's layout: view scores (B, Ns, V); score, angle logits, width and tolerance
(B, A, Ns, D). Targets come from :class:`MatchedLabels` (B, Ns, ...) with BL's score labels
(``score_labels``/``view_labels``, ``top_scores``, ``top_widths``, ``top_tolerance``).
"""
from typing import Dict, Tuple

import torch
from torch import Tensor
from torch.nn import functional as F

from mmgrasp.registry import MODELS
from mmgrasp.structures.matched_labels import MatchedLabels
from mmgrasp.geometry.grasp_frames import GRASP_MAX_WIDTH
from .gsnet_loss import mean_where

GRASP_MAX_TOLERANCE = 0.05
THRESH_BAD = 0.1


def huber_loss(error: Tensor, delta: float = 1.0) -> Tensor:
    """BL's elementwise Huber loss: 0.5·min(|e|, δ)² + δ·(|e| − min(|e|, δ))."""
    abs_error = error.abs()
    quadratic = abs_error.clamp(max=delta)
    return 0.5 * quadratic ** 2 + delta * (abs_error - quadratic)


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """BL's ``sum(values · mask) / (sum(mask) + 1e-6)``."""
    return (values * mask).sum() / (mask.sum() + 1e-6)


def best_angle_targets(matched: MatchedLabels) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per (seed, depth) the best angle class of the labels at the chosen view (argmax over A)
    and its label, width and tolerance, each (B, Ns, D) (the class as (B, Ns, D) int64)."""
    labels = matched.top_scores  # (B, Ns, A, D)
    index = labels.argmax(dim=2, keepdim=True)
    target = torch.gather(labels, 2, index).squeeze(2)
    width = torch.gather(matched.top_widths, 2, index).squeeze(2)
    tolerance = torch.gather(matched.top_tolerance, 2, index).squeeze(2)
    return index.squeeze(2), target, width, tolerance


def _stage2_terms(score: Tensor, angle: Tensor, width: Tensor, tolerance: Tensor,
                  matched: MatchedLabels, loss_mask: Tensor, score_mask: Tensor
                  ) -> Dict[str, Tensor]:
    """Score (Huber), angle (CE), width (Huber of error / 0.1) and tolerance (Huber of
    error / 0.05) at each (seed, depth)'s best label angle, averaged over the masks."""
    angle_class, target, target_width, target_tolerance = best_angle_targets(matched)
    index = angle_class[:, None]  # (B, 1, Ns, D) into the A dimension
    score_at = torch.gather(score, 1, index).squeeze(1)
    width_at = torch.gather(width, 1, index).squeeze(1)
    tolerance_at = torch.gather(tolerance, 1, index).squeeze(1)
    return dict(
        score=_masked_mean(huber_loss(score_at - target), score_mask),
        angle=_masked_mean(F.cross_entropy(angle, angle_class, reduction='none'), loss_mask),
        width=_masked_mean(huber_loss((width_at - target_width) / GRASP_MAX_WIDTH), loss_mask),
        tolerance=_masked_mean(huber_loss((tolerance_at - target_tolerance)
                                          / GRASP_MAX_TOLERANCE), loss_mask))


def _check(matched: MatchedLabels) -> None:
    if matched.view_labels is None or matched.top_tolerance is None:
        raise ValueError('GraspNet-baseline losses need BL score labels and tolerance: use a '
                         'NearestLabelAssigner with all_view_widths=True, with_tolerance=True, '
                         'gsnet_score_norm=False (or a ScaleBalancedAssigner)')


@MODELS.register_module()
class GraspNetBaselineLoss:
    """obj + view + 0.2·(score + angle + width + tolerance), each term reported on its own
    (already weighted, so the reported losses sum to the total).

    - objectness: cross-entropy of the seeds' logits against the objectness labels gathered at
      the seeds;
    - view: MSE of the view scores against ``view_labels``, mean over the (seed, view) entries
      of seeds on objects;
    - stage 2, per (seed, depth), at the best label angle of the chosen view: mask = seed on an
      object & label > 0.1; score Huber, angle cross-entropy, width Huber((pred − gt)/0.1),
      tolerance Huber((pred − gt)/0.05), each Σ(loss·mask)/(Σmask + 1e-6).

    Degenerate batches stay finite: the stage-2 means follow BL's Σ(loss·mask)/(Σmask + 1e-6),
    which is 0 over an empty mask (no seed on an object, no label above 0.1 at the chosen view:
    no positive μ, every width above 0.1); the view loss over no seed on an object is 0 (BL's
    ``mean`` over an empty selection would be NaN). Zero tolerance targets are plain targets.

    Args:
        objectness, view, grasp: term weights (1, 1, 0.2; ``grasp`` weighs the four stage-2
            terms).

    Call with objectness_logits (B, 2, Ns), seed_objectness (B, Ns) int64, view_scores
    (B, Ns, V), score/angle/width/tolerance predictions (B, A, Ns, D) and the matched labels.
    """

    def __init__(self, objectness: float = 1.0, view: float = 1.0, grasp: float = 0.2):
        self.weights = dict(objectness=objectness, view=view, score=grasp, angle=grasp,
                            width=grasp, tolerance=grasp)

    def __call__(self, objectness_logits: Tensor, seed_objectness: Tensor, view_scores: Tensor,
                 score: Tensor, angle: Tensor, width: Tensor, tolerance: Tensor,
                 matched: MatchedLabels) -> Dict[str, Tensor]:
        _check(matched)
        objectness = F.cross_entropy(objectness_logits, seed_objectness)
        on_object = seed_objectness > 0
        view = F.mse_loss(view_scores, matched.view_labels, reduction='none')
        view = mean_where(view, on_object[..., None].expand_as(view))
        graspable = matched.top_scores.amax(dim=2) > THRESH_BAD  # label at the best angle
        loss_mask = (on_object[..., None] & graspable).float()
        terms = dict(objectness=objectness, view=view,
                     **_stage2_terms(score, angle, width, tolerance, matched, loss_mask,
                                     loss_mask))
        return {f'loss_{k}': self.weights[k] * v for k, v in terms.items()}


@MODELS.register_module()
class ScaleBalancedGraspLoss(GraspNetBaselineLoss):
    """Scale-Balanced-Grasp's losses: GraspNet-baseline's terms with

    - the robust-graspable target (objectness & more than ``min_views`` views with a label
      above 0.1, ``matched.robust_graspable``) in place of objectness in the stage-1
      cross-entropy and the view mask;
    - view and stage-2 masks multiplied by the seed's width-bin weight
      (``matched.scale_weight``); the view loss is Σ(MSE·mask)/(Σmask + 1e-6);
    - the score mask widened to every depth of a seed when any of its depths qualifies (with
      the largest weighted mask value of the seed).

    total = obj + view + 0.2·grasp (grasp = score + angle + width + tolerance).

    Degenerate batches: every mask is used through Σ(loss·mask)/(Σmask + 1e-6) (SBG's rule),
    0 over an empty mask (no robust-graspable seed, no label above 0.1).
    """

    def __call__(self, objectness_logits: Tensor, seed_objectness: Tensor, view_scores: Tensor,
                 score: Tensor, angle: Tensor, width: Tensor, tolerance: Tensor,
                 matched: MatchedLabels) -> Dict[str, Tensor]:
        _check(matched)
        if matched.scale_weight is None or matched.robust_graspable is None:
            raise ValueError('ScaleBalancedGraspLoss needs scale_weight and robust_graspable: '
                             'use a ScaleBalancedAssigner')
        on_object = seed_objectness > 0
        graspable_label = (matched.robust_graspable & on_object).long()
        objectness = F.cross_entropy(objectness_logits, graspable_label)
        weight = matched.scale_weight
        view_mask = (graspable_label.float() * weight)[..., None].expand_as(view_scores)
        view = _masked_mean(F.mse_loss(view_scores, matched.view_labels, reduction='none'),
                            view_mask)
        graspable = matched.top_scores.amax(dim=2) > THRESH_BAD
        loss_mask = (on_object[..., None] & graspable).float() * weight[..., None]
        score_mask = loss_mask.amax(dim=2, keepdim=True).expand_as(loss_mask)
        terms = dict(objectness=objectness, view=view,
                     **_stage2_terms(score, angle, width, tolerance, matched, loss_mask,
                                     score_mask))
        return {f'loss_{k}': self.weights[k] * v for k, v in terms.items()}
