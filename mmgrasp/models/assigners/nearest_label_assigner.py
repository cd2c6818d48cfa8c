"""NearestLabelAssigner: each seed takes the grid of its nearest label point.

What label matching computes in GSNet, GraspNet-baseline and Scale-Balanced-Grasp
(``process_grasp_labels`` + ``match_grasp_view_and_label``), with grids read only through
:func:`gather_grids` — so dense and deferred labels give identical targets.
"""
import functools
from dataclasses import replace
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from mmgrasp.storage.labels.summaries import SUMMARY_MAX_WIDTH, SUMMARY_VIEW_MAX_MU
from mmgrasp.registry import TASK_UTILS
from mmgrasp.structures.grasp_labels import (gather_grids, gather_view_cells,
                                             gather_view_summaries, reads_matched_cells)
from mmgrasp.structures.label_batch import GraspLabelBatch
from mmgrasp.structures.matched_labels import MatchedLabels
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views
from mmgrasp.geometry.gripper import GripperLike, build_gripper


def log_ratio_decreasing(tables: np.ndarray) -> bool:
    """Whether ln(u / μ), as a device computes it in float32, is strictly decreasing over the
    positive μ ≤ u of the batch's objects (``tables``: their μ values, on the host) for every
    u among them — u_max, the batch's largest valid μ, is one of them or 0 — so that a slot's
    largest label is that of its min μ and only cells holding that μ attain it.

    Decided on the host, where the tables are, without reading u_max from the device: the
    float32 ratio u / μ is correctly rounded on every device, and float32 logs within 2 ulp
    of the true log of that ratio (CUDA's and torch's CPU log are within 1) are strictly
    ordered wherever the true logs of neighbouring values lie more than 2 ulp apart on each
    side. Cached per set of values (a store has a few).
    """
    values = np.unique(tables[tables > 0]).astype(np.float32)
    return _log_ratio_decreasing(values.tobytes())


@functools.lru_cache(maxsize=256)
def _log_ratio_decreasing(values: bytes) -> bool:
    mu = np.frombuffer(values, dtype=np.float32)  # sorted, distinct, positive
    logs = np.log((mu[:, None] / mu[None, :]).astype(np.float64))  # [u, μ]
    ulp = np.spacing(np.abs(logs).astype(np.float32)).astype(np.float64)
    gap = logs[:, :-1] - logs[:, 1:]  # next larger μ: a smaller ln(u / μ)
    considered = mu[None, 1:] <= mu[:, None]  # both μ ≤ u
    return bool(np.all(~considered | (gap > 2 * (ulp[:, :-1] + ulp[:, 1:]))))


@TASK_UTILS.register_module()
class NearestLabelAssigner:
    """Match seeds to label points and build :class:`MatchedLabels`.

    Args:
        all_view_widths: read widths at all views (GraspNet-baseline: the width ≤ 0.1 mask of
            the score labels needs them) instead of only at the chosen view (GSNet).
        with_tolerance: read tolerance at the chosen view (GraspNet-baseline).
        view_graspness: compute GSNet's view graspness targets.
        gsnet_score_norm: GSNet's score targets (μ normalised to [0, 1] at the chosen view)
            instead of GraspNet-baseline's ln(u_max / μ) at all views.
        distance_cutoff: seeds farther than ``max_distance`` from every label point get μ = 0
            (the reference methods have no cutoff).
        max_distance: metres, used with ``distance_cutoff``.
        num_views: V of the template views.
        view_graspness_max_mu: cells with 0 < μ ≤ this count as graspable (GSNet: 0.6).
        gripper: cells wider than its maximum width are no grasps (GraspNet's 0.1 m by default;
            the detector passes its own, :class:`mmgrasp.geometry.Gripper`).
    """

    def __init__(self, all_view_widths: bool = False, with_tolerance: bool = False,
                 view_graspness: bool = True, gsnet_score_norm: bool = True,
                 distance_cutoff: bool = False, max_distance: float = 0.01,
                 num_views: int = 300, view_graspness_max_mu: float = 0.6,
                 gripper: GripperLike = None):
        self.max_width = build_gripper(gripper).max_width
        self.all_view_widths = all_view_widths
        self.with_tolerance = with_tolerance
        self.view_graspness = view_graspness
        self.gsnet_score_norm = gsnet_score_norm
        self.distance_cutoff = distance_cutoff
        self.max_distance = max_distance
        self.num_views = num_views
        self.view_graspness_max_mu = view_graspness_max_mu
        self.best_grasp_width = False  # Scale-Balanced-Grasp's assigner needs it

    # ------------------------------------------------------------------ stage one
    def nearest(self, seeds: Tensor, labels: GraspLabelBatch):
        """Nearest label point of every seed among its own frame's label points.

        The frames' label points are contiguous; with ``labels.frame_points`` (host counts)
        each frame's slice is known without reading the device (a frame without label
        points keeps index 0 and distance inf)."""
        B, Ns, _ = seeds.shape
        camera_points = labels.camera_points()
        counts = labels.frame_points
        if len(counts) != B:
            point_frame = labels.object_frame[labels.point_object]
            counts = tuple(int(c) for c in torch.bincount(point_frame, minlength=B).cpu())
        index = seeds.new_zeros((B, Ns), dtype=torch.int64)
        distance = seeds.new_full((B, Ns), float('inf'))
        start = 0
        for b, count in enumerate(counts):
            if count:
                d = torch.cdist(seeds[b], camera_points[start:start + count],
                                compute_mode='donot_use_mm_for_euclid_dist')
                distance[b], nearest = d.min(dim=1)
                index[b] = nearest + start
            start += count
        return index, distance, camera_points

    def view_reindex(self, poses: Tensor) -> Tensor:
        """(O, V) object view j whose rotated direction R·v_j is nearest to template slot v."""
        views = generate_grasp_views(self.num_views, poses.device)
        rotated = views @ poses[:, :, :3].transpose(1, 2)
        d = torch.cdist(views.expand(len(poses), -1, -1), rotated,
                        compute_mode='donot_use_mm_for_euclid_dist')
        return d.argmin(dim=2)

    def view_rotations(self, poses: Tensor, view_index: Tensor) -> Tensor:
        """(O, V, 3, 3) gripper rotation of each slot: R · M(−v_j, 0) for its object view j."""
        views = generate_grasp_views(self.num_views, poses.device)
        template = approach_to_matrix(-views, torch.zeros(len(views), device=poses.device))
        rotations = poses[:, None, :, :3] @ template[None]
        return torch.gather(rotations, 1, view_index[..., None, None].expand(-1, -1, 3, 3))

    def assign(self, seeds: Tensor, labels: GraspLabelBatch) -> MatchedLabels:
        """Stage one: ``seeds`` (B, Ns, 3) camera-frame seed points.

        A frame without labelled objects (the others having some) gives its seeds
        ``valid=False`` and μ = 0 everywhere (the reference code fails on such a frame:
        ``torch.cat`` of an empty object list); a batch without any labelled object is refused.
        BL's ln(u_max/μ) uses μ only where μ > 0, so a batch without positive μ gives all-zero
        labels, never ln of 0.

        Dense labels (and deferred ones without μ codes) go through the full computation on
        (B, Ns, V, A, D) grids; deferred labels of a store with μ codes read per-view summaries
        of the matched rows instead (:meth:`_summary_targets`), with the same targets bit for
        bit and no grid-sized field.
        """
        if labels.num_objects == 0:
            raise ValueError('NearestLabelAssigner: the batch has no labelled object; check '
                             'SampleGraspLabels(min_object_points) and the frames')
        point, distance, camera_points = self.nearest(seeds, labels)
        obj = labels.point_object[point]
        valid = torch.isfinite(distance)
        if self.distance_cutoff:
            valid &= distance < self.max_distance
        object_view = self.view_reindex(labels.poses)
        matched = MatchedLabels(
            point=camera_points[point], distance=distance, valid=valid, object_index=obj,
            row=labels.point_row[point], view_index=object_view[obj],
            slot_rot=self.view_rotations(labels.poses, object_view))
        if self._reads_summaries(labels):
            summarised = self._summary_targets(matched, labels)
            if summarised is not None:
                return summarised
        return self._grid_targets(matched, labels)

    def _grid_targets(self, matched: MatchedLabels, labels: GraspLabelBatch) -> MatchedLabels:
        """The full computation: (B, Ns, V, A, D) grids of the matched rows, then targets."""
        owner, rows = matched.object_index.reshape(-1), matched.row.reshape(-1)
        view_index, valid = matched.view_index, matched.valid
        scores = self._reindexed(labels, 'scores', owner, rows, view_index)
        collision = self._reindexed(labels, 'collision', owner, rows, view_index)
        if collision is not None:  # collision='mask': μ = 0 where collided, as 'zero_scores'
            scores = scores.masked_fill(collision, 0)
        scores = torch.where(valid[..., None, None, None], scores, scores.new_zeros(()))
        matched = replace(matched, scores=scores, collision=collision,
                          view_rot=matched.slot_rot[matched.object_index])
        if self.all_view_widths:
            matched.widths = self._reindexed(labels, 'widths', owner, rows, view_index)
        if self.view_graspness:
            matched.view_graspness = self._view_graspness(scores)
        if not self.gsnet_score_norm:
            mask = scores > 0
            if matched.widths is not None:
                mask &= matched.widths <= self.max_width
            matched.score_max = scores.max()
            matched.score_labels = self._log_ratio(scores, mask, matched.score_max)
            matched.view_labels = matched.score_labels.amax(dim=(-2, -1))
        return matched

    def _reads_summaries(self, labels: GraspLabelBatch) -> bool:
        """Deferred labels with per-view summaries built for this assigner's thresholds."""
        return (reads_matched_cells(labels.objects) and self.max_width == SUMMARY_MAX_WIDTH
                and (not self.view_graspness
                     or self.view_graspness_max_mu == SUMMARY_VIEW_MAX_MU))

    def _summary_targets(self, matched: MatchedLabels, labels: GraspLabelBatch
                         ) -> Optional[MatchedLabels]:
        """Stage-one targets from the matched rows' per-view summaries (one read).

        - view graspness: the count of 0 < μ ≤ 0.6 per slot, as the grid's count;
        - BL's view label: ln(u_max / min μ) over the masked cells of the slot, equal to the max
          over the cells of ln(u_max / μ) because that ratio decreases with μ; u_max is the
          largest of the slots' largest μ;
        - Scale-Balanced-Grasp's best-grasp width: the first slot holding the best label, then
          the width of its first cell holding its min μ (cell (0, 0) of slot 0 when every label
          is 0, as the grid's argmax).

        None (the caller computes on grids) when the log ratio may not be strictly decreasing
        over the batch's μ values, the one assumption of the above (never seen: the μ values
        are far apart), decided on the host from the objects' value tables.
        """
        B, Ns, V = matched.view_index.shape
        A, D = labels.objects[0].deferred.grid[1:]
        names = ['view_count'] if self.view_graspness else []
        min_mu = 'view_min_mu' if self.all_view_widths else 'view_min_mu_any'
        if not self.gsnet_score_norm:
            names += ['view_max_mu', min_mu]
            if self.best_grasp_width:
                names.append('view_best_width')
        summary = gather_view_summaries(
            labels.objects, names, matched.object_index.reshape(-1), matched.row.reshape(-1),
            matched.view_index.reshape(-1, V), first_cell_widths=self.best_grasp_width)
        tables = summary.pop('value_tables', None)
        summary = {k: v.reshape(B, Ns, *v.shape[1:]) for k, v in summary.items()}
        valid = matched.valid[..., None]
        if self.view_graspness:
            count = summary['view_count'].masked_fill(~valid, 0)
            matched.view_graspness = self._normalised_view_graspness(count.float() / (A * D))
        if not self.gsnet_score_norm:
            zero = matched.slot_rot.new_zeros(())
            u_max = torch.where(valid, summary['view_max_mu'], zero).max()
            low = torch.where(valid, summary[min_mu], zero)
            if not log_ratio_decreasing(tables):
                return None
            matched.score_max = u_max
            matched.view_labels = self._log_ratio(low, low > 0, u_max)
            if self.best_grasp_width:
                best_view = matched.view_labels.argmax(dim=2, keepdim=True)
                best = torch.gather(summary['view_best_width'], 2, best_view).squeeze(2)
                matched.best_width = torch.where(matched.view_labels.amax(dim=2) > 0, best,
                                                 summary['first_cell_width'])
        return matched

    def _reindexed(self, labels: GraspLabelBatch, name: str, owner: Tensor, rows: Tensor,
                   view_index: Tensor) -> Optional[Tensor]:
        """(B, Ns, V, A, D) grid of the matched rows, slots in template (camera) order (None
        for 'collision' when the labels carry no mask)."""
        grid = gather_grids(labels.objects, name, owner, rows, view_index.reshape(len(owner), -1))
        return None if grid is None else grid.reshape(*view_index.shape, *grid.shape[2:])

    def _view_graspness(self, scores: Tensor) -> Tensor:
        graspable = (scores > 0) & (scores <= self.view_graspness_max_mu)
        count = graspable.sum(dim=(-2, -1)).float() / (scores.shape[-2] * scores.shape[-1])
        return self._normalised_view_graspness(count)

    @staticmethod
    def _normalised_view_graspness(count: Tensor) -> Tensor:
        """Min-max over the views of each seed (GSNet), of the graspable fraction per slot."""
        low = count.amin(dim=-1, keepdim=True)
        high = count.amax(dim=-1, keepdim=True)
        return (count - low) / (high - low + 1e-5)

    @staticmethod
    def _log_ratio(mu: Tensor, mask: Tensor, u_max: Tensor) -> Tensor:
        """ln(u_max / μ) where ``mask``, else 0 (μ is replaced by 1 off the mask to stay finite)."""
        safe = torch.where(mask, mu, torch.ones_like(mu))
        return torch.where(mask, torch.log(u_max / safe), torch.zeros_like(mu))

    # ------------------------------------------------------------------ stage two
    def match_view(self, matched: MatchedLabels, top_view: Tensor,
                   labels: GraspLabelBatch) -> MatchedLabels:
        """Stage two: ``top_view`` (B, Ns) template slot chosen per seed by the network.

        GSNet's score normalisation, s = ln(u_max/μ) / (ln(u_max/u_min) + 1e-6) over the whole
        (B, Ns, A, D) tensor, runs only when some μ at the chosen views is positive, as in
        GSNet (graspness_implementation utils/label_generation.py); otherwise u_max = u_min = 0
        would make ln(0/0) NaN, and every target is 0 instead.
        """
        index = top_view[..., None]
        if matched.view_rot is not None:
            top_view_rot = torch.gather(matched.view_rot, 2, index[..., None, None].expand(
                -1, -1, 1, 3, 3)).squeeze(2)
        else:  # the same rotations, gathered only at the chosen slots
            top_view_rot = matched.slot_rot[matched.object_index, top_view]
        owner, rows = matched.object_index.reshape(-1), matched.row.reshape(-1)
        object_view = torch.gather(matched.view_index, 2, index).reshape(-1)
        if matched.scores is None:  # per-view summaries in stage one: read the view's cells
            mu, widths, tolerance = self._view_cells(matched, labels, owner, rows, object_view)
        else:
            mu, widths, tolerance = self._grid_view(matched, top_view, labels, owner, rows,
                                                    object_view)
        if self.gsnet_score_norm:
            mu = torch.where((mu > 0) & (widths <= self.max_width), mu, mu.new_zeros(()))
            positive = mu > 0
            # without a positive μ, GSNet does not normalise and every target stays 0; chosen
            # on the device (u_min is inf then, and the ratio is discarded)
            u_max = mu.max()
            u_min = torch.where(positive, mu, mu.new_full((), float('inf'))).min()
            ratio = self._log_ratio(mu, positive, u_max) / (torch.log(u_max / u_min) + 1e-6)
            top_scores = torch.where(positive.any(), ratio, mu.new_zeros(()))
        elif matched.score_labels is not None:
            top_scores = self._at_view(matched.score_labels, top_view)
        else:  # ln(u_max / μ) of the view's cells, as the grid's labels at that view
            mask = mu > 0
            if self.all_view_widths:
                mask &= widths <= self.max_width
            top_scores = self._log_ratio(mu, mask, matched.score_max)
        return replace(matched, top_view=top_view, top_view_rot=top_view_rot,
                       top_scores=top_scores, top_widths=widths, top_tolerance=tolerance)

    def _grid_view(self, matched: MatchedLabels, top_view: Tensor, labels: GraspLabelBatch,
                   owner: Tensor, rows: Tensor, object_view: Tensor):
        """μ, widths and tolerance (B, Ns, A, D) at the chosen slots, from stage one's grids."""
        mu = self._at_view(matched.scores, top_view)
        if matched.widths is not None:
            widths = self._at_view(matched.widths, top_view)
        else:
            widths = gather_grids(labels.objects, 'widths', owner, rows,
                                  object_view).reshape(mu.shape)
        tolerance = None
        if self.with_tolerance:
            tolerance = gather_grids(labels.objects, 'tolerance', owner, rows,
                                     object_view).reshape(mu.shape)
            if matched.collision is not None:
                tolerance = tolerance.masked_fill(self._at_view(matched.collision, top_view), 0)
            tolerance = torch.where(matched.valid[..., None, None], tolerance,
                                    tolerance.new_zeros(()))
        return mu, widths, tolerance

    def _view_cells(self, matched: MatchedLabels, labels: GraspLabelBatch, owner: Tensor,
                    rows: Tensor, object_view: Tensor):
        """μ, widths and tolerance (B, Ns, A, D) at the chosen slots, read as the view's cells
        (one read): collisions and invalid seeds written as zeros, as in stage one's grids."""
        names = ['scores', 'widths', 'collision'] + (['tolerance'] if self.with_tolerance else [])
        cells = gather_view_cells(labels.objects, names, owner, rows, object_view)
        B, Ns = matched.valid.shape
        cells = {k: v.reshape(B, Ns, *v.shape[1:]) for k, v in cells.items()}
        valid = matched.valid[..., None, None]
        collided = cells.get('collision')
        mu, tolerance = cells['scores'], cells.get('tolerance')
        if collided is not None:
            mu = mu.masked_fill(collided, 0)
            tolerance = None if tolerance is None else tolerance.masked_fill(collided, 0)
        mu = torch.where(valid, mu, mu.new_zeros(()))
        if tolerance is not None:
            tolerance = torch.where(valid, tolerance, tolerance.new_zeros(()))
        return mu, cells['widths'], tolerance

    @staticmethod
    def _at_view(grid: Tensor, top_view: Tensor) -> Tensor:
        """(B, Ns, V, A, D) -> (B, Ns, A, D) at each seed's chosen slot."""
        index = top_view[..., None, None, None].expand(-1, -1, 1, *grid.shape[3:])
        return torch.gather(grid, 2, index).squeeze(2)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(all_view_widths={self.all_view_widths}, '
                f'with_tolerance={self.with_tolerance}, view_graspness={self.view_graspness}, '
                f'gsnet_score_norm={self.gsnet_score_norm}, '
                f'distance_cutoff={self.distance_cutoff}, max_distance={self.max_distance})')
