"""EconomicAssigner: EconomicGrasp's label assignment (``process_grasp_labels`` of
iSEE-Laboratory/EconomicGrasp ``utils/label_generation.py`` @7361bb6), reading the economic rows
of the matched label points only (deferred), or from whole per-scene arrays (dense reference).

Interface (the reference's own names, shapes and dtypes; B frames, M = 1024 seeds, V = 300
template views, K = top-k views kept by the asset, 300 by default):

Inputs of :meth:`EconomicAssigner.assign(seed_xyz, top_view_inds, frames)`:
    seed_xyz: (B, M, 3) float32, ``end_points['xyz_graspable']`` (camera frame, after the flip).
    top_view_inds: (B, M) int64, ``end_points['grasp_top_view_inds']`` (template view chosen by
        the view head: multinomial in training).
    frames: B :class:`~mmgrasp.structures.economic_labels.EconomicFrameLabels`, i.e.
        ``[s.economic_labels for s in data_samples]`` (set by ``LoadEconomicLabels`` and
        ``PackGraspInputs``: poses after augmentation, kept label points, and the economic rows
        dense or deferred; the assigner moves them to the seeds' device itself, so no data
        preprocessor change is needed).

Output: a dict with exactly the reference keys (``end_points`` after ``process_grasp_labels``)
plus the returned rotation under ``batch_grasp_view_rot``:
    batch_grasp_view_rot:       (B, M, 3, 3) float32 gripper rotation of the chosen template
                                view (the first return value of the reference function, which
                                the cylinder grouping consumes in training).
    batch_grasp_point:          (B, M, 3) float32 nearest label point, camera frame.
    batch_grasp_view_graspness: (B, M, V) float32 view graspness re-indexed to template views.
    batch_grasp_rotations:      (B, M) int32 in-plane angle class 0..A-1; 12 when unmatched.
    batch_grasp_depth:          (B, M) int32 depth class 0..D-1; 4 when unmatched.
    batch_grasp_score:          (B, M) float32 score 1.1 − μ as stored (uint8 / 10); 0 unmatched.
    batch_grasp_width:          (B, M) float32 metres (uint8 / 1000); 0.1 when unmatched.
    batch_valid_mask:           (B, M) bool: nearest label point within 5 mm AND the chosen
                                view is among the point's stored top-K views.
    C: Valid Points:            () float32, seeds within 5 mm per frame (the reference's log).

Per-point targets (``objectness_label`` (B, N) int64, ``graspness_label`` (B, N) float32) are
not the assigner's: they come from the data sample as for GSNet (``inputs['objectness']``,
``inputs['graspness']``; the dataset config is ``configs/_base_/datasets/graspnet_economic.py``,
which also packs ``inputs['coors']`` = points / 0.005; the all-ones input features are the
model's to make).

Registered in TASK_UTILS: ``dict(type='EconomicAssigner', num_views=300, max_distance=0.005)``.
A frame without kept label points gets the unmatched defaults, invalid seeds, zero view
graspness and the template rotation of the chosen view (the reference would fail on it).
"""
from typing import Dict, Sequence

import torch
from torch import Tensor

from mmgrasp.registry import TASK_UTILS
from mmgrasp.structures.economic_labels import EconomicFrameLabels, gather_economic_rows
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views

#: the reference's defaults of seeds whose chosen view is not among the stored top views
UNMATCHED_ROTATION, UNMATCHED_DEPTH, UNMATCHED_SCORE, UNMATCHED_WIDTH = 12, 4, 0.0, 0.1


def transform_points(points: Tensor, pose: Tensor) -> Tensor:
    """The reference's ``transform_point_cloud(points, pose, '3x4')``: (pose @ [p, 1]ᵀ)ᵀ."""
    ones = points.new_ones(len(points), 1)
    return torch.matmul(pose, torch.cat([points, ones], 1).T).T[:, :3]


def slot_of_view(view_index: Tensor) -> Tensor:
    """(O, V) inverse of ``view_index`` (template slot j -> object view): for each object view
    the LAST slot that maps to it, −1 where none does. The reference writes
    ``top_view_index_trans[tpid, tvip] = tids`` with every matching slot; two slots of one
    object view overwrite each other and the last write wins on the CPU (the quirk,
    reproduced; on CUDA the reference's winner is not defined)."""
    O, V = view_index.shape
    slots = torch.arange(V, device=view_index.device).expand(O, -1)
    inverse = torch.full((O, V), -1, dtype=torch.int64, device=view_index.device)
    return inverse.scatter_reduce(1, view_index, slots, reduce='amax', include_self=True)


@TASK_UTILS.register_module()
class EconomicAssigner:
    """EconomicGrasp's ``process_grasp_labels``, batched over the frames' objects, rows read
    once per batch through :func:`gather_economic_rows`.

    Args:
        num_views: V of the template views (300).
        max_distance: seeds whose nearest label point is at least this far are invalid (5 mm).
    """

    def __init__(self, num_views: int = 300, max_distance: float = 0.005):
        self.num_views = int(num_views)
        self.max_distance = float(max_distance)

    def view_index(self, poses: Tensor) -> Tensor:
        """(O, V): object view whose rotated direction R·v_i is nearest to template slot j
        (the reference's ``knn(grasp_views_trans_, grasp_views_, k=1)``)."""
        views = generate_grasp_views(self.num_views, poses.device)
        rotated = torch.matmul(poses[:, None, :, :3], views.T[None]).transpose(-1, -2)
        d = torch.cdist(views.expand(len(poses), -1, -1), rotated[:, 0],
                        compute_mode='donot_use_mm_for_euclid_dist')
        return d.argmin(dim=2)

    def slot_rotations(self, poses: Tensor, view_index: Tensor) -> Tensor:
        """(O, V, 3, 3) R · M(−v_i, 0) of the object view behind each slot."""
        views = generate_grasp_views(self.num_views, poses.device)
        template = approach_to_matrix(-views, torch.zeros(len(views), device=poses.device))
        rotations = torch.matmul(poses[:, None, :, :3], template[None])
        return torch.gather(rotations, 1, view_index[..., None, None].expand(-1, -1, 3, 3))

    def assign(self, seed_xyz: Tensor, top_view_inds: Tensor,
               frames: Sequence[EconomicFrameLabels]) -> Dict[str, Tensor]:
        """The targets of a batch (see the module docstring). A frame without kept label
        points (the reference cannot run on it) gets the unmatched defaults, invalid seeds,
        zero view graspness and the template rotation of the chosen view."""
        B, M, _ = seed_xyz.shape
        device = seed_xyz.device
        if len(frames) != B:
            raise ValueError(f'EconomicAssigner: {B} frames of seeds but {len(frames)} labels')
        frames = [f.to(device) for f in frames]
        labelled = [b for b, f in enumerate(frames) if len(f.points)]
        if len(labelled) == B:  # the usual batch: no default table to fill in
            found, valid_points = self._assign_labelled(seed_xyz, top_view_inds, frames)
            found['C: Valid Points'] = valid_points / B
            return found
        views = generate_grasp_views(self.num_views, device)
        template = approach_to_matrix(-views, torch.zeros(len(views), device=device))
        out = {
            'batch_grasp_view_rot': template[top_view_inds.long()],
            'batch_grasp_point': seed_xyz.new_zeros(B, M, 3),
            'batch_grasp_view_graspness': seed_xyz.new_zeros(B, M, self.num_views),
            'batch_grasp_rotations': torch.full((B, M), UNMATCHED_ROTATION, dtype=torch.int32,
                                                device=device),
            'batch_grasp_depth': torch.full((B, M), UNMATCHED_DEPTH, dtype=torch.int32,
                                            device=device),
            'batch_grasp_score': torch.full((B, M), UNMATCHED_SCORE, device=device),
            'batch_grasp_width': torch.full((B, M), UNMATCHED_WIDTH, device=device),
            'batch_valid_mask': torch.zeros((B, M), dtype=torch.bool, device=device),
        }
        valid_points = seed_xyz.new_zeros(())
        if labelled:
            index = torch.tensor(labelled, device=device)
            found, valid_points = self._assign_labelled(
                seed_xyz[index], top_view_inds[index], [frames[b] for b in labelled])
            for key, value in found.items():
                out[key][index] = value.to(out[key].dtype)
        out['C: Valid Points'] = valid_points / B
        return out

    def _assign_labelled(self, seed_xyz: Tensor, top_view_inds: Tensor,
                         frames: Sequence[EconomicFrameLabels]):
        """The reference's computation on frames that all have label points, batched: every
        label point posed at once, one padded exact distance table for the batch (padding
        far away, after the real points, so ``argmin``'s first-index ties stay the
        reference's), and no host read of a point count (launches and syncs do not grow with
        the number of objects)."""
        B, M, _ = seed_xyz.shape
        device = seed_xyz.device
        sizes = [len(f.points) for f in frames]
        P = max(sizes)
        object_offsets = torch.tensor([0] + [len(f.poses) for f in frames],
                                      device=device).cumsum(0)[:-1]
        poses = torch.cat([f.poses for f in frames])
        points = torch.cat([f.points for f in frames])
        instance = torch.cat([f.point_instance for f in frames])
        point_frame = torch.repeat_interleave(
            torch.arange(B, device=device), torch.tensor(sizes, device=device),
            output_size=len(points))
        homogeneous = torch.cat([points, points.new_ones(len(points), 1)], 1)
        camera = torch.matmul(poses[instance + object_offsets[point_frame]],
                              homogeneous[:, :, None])[:, :, 0]  # (ΣP, 3) pose @ [p, 1]ᵀ
        point_offsets = torch.tensor([0] + sizes[:-1], device=device).cumsum(0)
        slot = torch.arange(len(points), device=device) - point_offsets[point_frame]
        padded = camera.new_full((B, P, 3), 1e6).index_put_((point_frame, slot), camera)
        d = torch.cdist(seed_xyz, padded, compute_mode='donot_use_mm_for_euclid_dist')
        global_index = (d.argmin(dim=2) + point_offsets[:, None]).reshape(-1)  # (B·M,)
        frame = torch.arange(B, device=device).repeat_interleave(M)
        rows = gather_economic_rows(frames, frame, global_index - point_offsets[frame], device)
        points = camera[global_index]
        objects = instance[global_index]

        view_index = self.view_index(poses)  # (O, V)
        slot_rot = self.slot_rotations(poses, view_index)
        inverse = slot_of_view(view_index)
        obj = objects + object_offsets[frame]  # (B·M,)
        pred = top_view_inds.reshape(-1).long()

        graspness = torch.gather(rows['vgraspness'], 1, view_index[obj])
        top_rot = slot_rot[obj, pred]
        stored_slots = torch.gather(inverse[obj], 1, rows['topview'])  # (B·M, K)
        hit = stored_slots == pred[:, None]
        matched = hit.any(1)
        k = hit.to(torch.int8).argmax(1)[:, None]

        def at_k(name: str, default) -> Tensor:
            value = torch.gather(rows[name], 1, k)[:, 0]
            return torch.where(matched, value, torch.full_like(value, default))

        point = points.reshape(B, M, 3)
        distance = torch.norm(seed_xyz - point, dim=-1)
        valid_point = distance < self.max_distance
        return {
            'batch_grasp_view_rot': top_rot.reshape(B, M, 3, 3),
            'batch_grasp_point': point,
            'batch_grasp_view_graspness': graspness.reshape(B, M, -1),
            'batch_grasp_rotations': at_k('rotations', UNMATCHED_ROTATION).reshape(B, M),
            'batch_grasp_depth': at_k('depth', UNMATCHED_DEPTH).reshape(B, M),
            'batch_grasp_score': at_k('scores', UNMATCHED_SCORE).reshape(B, M),
            'batch_grasp_width': at_k('widths', UNMATCHED_WIDTH).reshape(B, M),
            'batch_valid_mask': valid_point & matched.reshape(B, M),
        }, valid_point.sum().float()

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_views={self.num_views}, '
                f'max_distance={self.max_distance})')
