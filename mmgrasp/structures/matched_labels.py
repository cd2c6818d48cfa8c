"""MatchedLabels: the per-seed targets that grasp losses consume.

Shapes use B frames, Ns seeds per frame, V template views, A in-plane angles, D depths.
Stage one (``NearestLabelAssigner.assign``, after seed selection) fills the all-view fields;
stage two (``NearestLabelAssigner.match_view``, after the network has chosen a view per seed)
fills the ``top_*`` fields. Fields an assigner option switches off are None.
"""
from dataclasses import dataclass, fields
from typing import Iterator, Optional, Tuple

from torch import Tensor

#: per-seed expansions over the views ((B, Ns, V, A, D) grids and (B, Ns, V, 3, 3) rotations),
#: built only by the full computation on grids (dense labels, or deferred ones without μ codes);
#: labels matched through per-view summaries leave them None, and no loss consumes them
GRID_FIELDS = ('view_rot', 'scores', 'widths', 'collision', 'score_labels')


@dataclass
class MatchedLabels:
    """Per-seed label targets. Stage one (label matching) fills the fields up to
    ``robust_graspable``; stage two (at the chosen view) the ``top_*`` fields.

    Attributes:
        point: (B, Ns, 3) matched label point, camera frame.
        distance: (B, Ns) seed to matched label point, metres.
        valid: (B, Ns) bool; False where the frame has no label point or (with a distance
            cutoff) the nearest one is too far; all grids of an invalid seed read μ = 0.
        object_index: (B, Ns) int64 index into ``GraspLabelBatch.objects``.
        row: (B, Ns) int64 label point row within that object.
        view_index: (B, Ns, V) int64 object-frame view behind each camera-frame template slot.
        slot_rot: (O, V, 3, 3) gripper rotation of each slot of each object of the batch (the
            rotated object view behind the slot).
        view_rot: (B, Ns, V, 3, 3) ``slot_rot`` of each seed's object (full computation only).
        scores: (B, Ns, V, A, D) friction μ per slot: > 0 valid, 0 collided, −1 infeasible;
            None where the labels are read as per-view summaries and chosen-view cells
            (deferred labels of a store with μ codes: no grid-sized field is built).
        widths: (B, Ns, V, A, D) metres, or None (read at the chosen view only, or summaries).
        collision: (B, Ns, V, A, D) bool scene collision per slot under
            ``SampleGraspLabels(collision='mask')`` (already applied: μ and tolerance read 0
            there, the targets of ``'zero_scores'``; kept for a loss that wants the mask), else
            None (also with summaries).
        view_graspness: (B, Ns, V) GSNet view graspness in [0, 1], or None.
        score_labels: (B, Ns, V, A, D) ln(u_max / μ) where μ > 0 (and width ≤ 0.1 when widths
            are read at all views), else 0; None under GSNet's normalisation (or summaries).
        view_labels: (B, Ns, V) max of ``score_labels`` over A·D, or None.
        score_max: () u_max, the batch's largest μ over all slots (BL's labels), or None.
        scale_weight: (B, Ns) Scale-Balanced-Grasp width-bin weight of the seed's best grasp.
        best_width: (B, Ns) width of that best grasp (first argmax of ``score_labels`` over
            V·A·D), Scale-Balanced-Grasp only.
        robust_graspable: (B, Ns) bool, more than ``min_views`` views with a label > 0.1
            (Scale-Balanced-Grasp; combined with objectness by the model).
        top_view: (B, Ns) int64 chosen template slot.
        top_view_rot: (B, Ns, 3, 3).
        top_scores: (B, Ns, A, D) score targets at the chosen view: GSNet's normalised score in
            [0, 1], or ``score_labels`` at that view.
        top_widths: (B, Ns, A, D) metres.
        top_tolerance: (B, Ns, A, D) metres, or None.
    """
    point: Tensor
    distance: Tensor
    valid: Tensor
    object_index: Tensor
    row: Tensor
    view_index: Tensor
    slot_rot: Optional[Tensor] = None
    view_rot: Optional[Tensor] = None
    scores: Optional[Tensor] = None
    widths: Optional[Tensor] = None
    collision: Optional[Tensor] = None
    view_graspness: Optional[Tensor] = None
    score_labels: Optional[Tensor] = None
    view_labels: Optional[Tensor] = None
    score_max: Optional[Tensor] = None
    scale_weight: Optional[Tensor] = None
    best_width: Optional[Tensor] = None
    robust_graspable: Optional[Tensor] = None
    top_view: Optional[Tensor] = None
    top_view_rot: Optional[Tensor] = None
    top_scores: Optional[Tensor] = None
    top_widths: Optional[Tensor] = None
    top_tolerance: Optional[Tensor] = None

    def items(self) -> Iterator[Tuple[str, Optional[Tensor]]]:
        """(name, tensor or None) for every field, in declaration order."""
        for f in fields(self):
            yield f.name, getattr(self, f.name)
