"""ScaleBalancedAssigner: GraspNet-baseline's matching plus Scale-Balanced-Grasp's targets."""
from typing import Dict, Optional

import torch
from torch import Tensor

from mmgrasp.registry import TASK_UTILS
from mmgrasp.structures.label_batch import GraspLabelBatch
from mmgrasp.structures.matched_labels import MatchedLabels
from .nearest_label_assigner import NearestLabelAssigner


@TASK_UTILS.register_module()
class ScaleBalancedAssigner(NearestLabelAssigner):
    """Adds the width-histogram weight of each seed and the robust-graspable target.

    Weight of width bin k: w_k = 1 − ln(n_k / max n) from the scale statistic (counts n_k over
    linear bins). A seed's weight is that of the width of its best grasp (argmax of the score
    labels over V·A·D); widths not strictly inside any bin fall to bin 0, as in the reference.
    A seed is robust-graspable when more than ``min_views`` views have a label above
    ``view_threshold``.

    Args:
        scale_statistic: ``{'interval': edges, 'num': counts}``; may be set later with
            :meth:`set_scale_statistic` (ScaleStatisticHook does that before training).
        min_views: views needed for a robust-graspable seed (10).
        view_threshold: label threshold of a graspable view (0.1).
        **kwargs: NearestLabelAssigner options; GraspNet-baseline's by default.
    """

    def __init__(self, scale_statistic: Optional[Dict[str, list]] = None, min_views: int = 10,
                 view_threshold: float = 0.1, **kwargs):
        options = dict(all_view_widths=True, with_tolerance=True, view_graspness=False,
                       gsnet_score_norm=False)
        options.update(kwargs)
        super().__init__(**options)
        if not self.all_view_widths or self.gsnet_score_norm:
            raise ValueError('ScaleBalancedAssigner needs all_view_widths=True and '
                             'gsnet_score_norm=False (it weighs the best grasp of all views)')
        self.best_grasp_width = True
        self.min_views = min_views
        self.view_threshold = view_threshold
        self.edges: Optional[Tensor] = None
        self.bin_weights: Optional[Tensor] = None
        if scale_statistic is not None:
            self.set_scale_statistic(scale_statistic)

    def set_scale_statistic(self, statistic: Dict[str, list]) -> None:
        counts = torch.tensor(statistic['num'], dtype=torch.float64)
        edges = torch.tensor(statistic['interval'], dtype=torch.float64)
        if len(edges) != len(counts) + 1 or (counts <= 0).any():
            raise ValueError(f'scale statistic needs len(interval) == len(num) + 1 and positive '
                             f'counts, got {len(edges)} edges and counts {counts.tolist()}')
        self.edges = edges.float()
        self.bin_weights = (1 - torch.log(counts / counts.max())).float()

    def assign(self, seeds: Tensor, labels: GraspLabelBatch) -> MatchedLabels:
        if self.bin_weights is None:
            raise RuntimeError('ScaleBalancedAssigner: no scale statistic; add '
                               "dict(type='ScaleStatisticHook') to custom_hooks or pass "
                               'scale_statistic=')
        matched = super().assign(seeds, labels)
        if matched.score_labels is not None:  # grids (else the summaries gave best_width)
            best = matched.score_labels.flatten(2).argmax(dim=2, keepdim=True)
            matched.best_width = torch.gather(matched.widths.flatten(2), 2, best).squeeze(2)
        width = matched.best_width
        edges = self.edges.to(width.device)
        inside = (width[..., None] > edges[:-1]) & (width[..., None] < edges[1:])
        bin_index = torch.where(inside.any(-1), inside.int().argmax(-1), 0)
        matched.scale_weight = self.bin_weights.to(width.device)[bin_index]
        graspable_views = (matched.view_labels > self.view_threshold).sum(dim=-1)
        matched.robust_graspable = graspable_views > self.min_views
        return matched
