"""GSNet (Wang et al., ICCV 2021): graspness-guided seeds on a sparse voxel U-Net."""
import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.structures.grasp_labels import explain_deferred_grid_access
from ..heads.gsnet_heads import CloudCrop, SWADHead
from mmgrasp.geometry.grasp_frames import approach_to_matrix
from .graspness_seeds import GraspnessSeedDetector, batch_generator


@MODELS.register_module()
class GSNet(GraspnessSeedDetector):
    """Backbone → objectness/graspness → graspable mask + FPS seeds → approach views (the
    stages of :class:`GraspnessSeedDetector`) → (training) label matching → cylinder crops →
    score/width.

    The assigner runs inside :meth:`loss`, after the seeds are chosen: with deferred grids that
    is where the label rows are read. The wall time of each part is in ``self.timer``
    (backbone, seed_selection, view, assigner, grouper, head, losses).

    Args:
        backbone: per-point feature network, (B, N, 3) -> (B, C, N), with ``out_channels``.
        assigner: a NearestLabelAssigner config (GSNet's options by default).
        num_seeds: seeds per frame (1024).
        graspness_threshold: graspable points have predicted graspness above this (0.1).
        seed: seed of the model's own draws (the chosen view per seed in training).
        crop, loss, num_views/num_angles/num_depths: head and loss settings.
        gripper: the gripper (widths, depths, height, collision filter; see GraspDetector).
    """

    score_label = 'predicted grasp score (labels 0-1)'

    def __init__(self, backbone: dict, assigner: Optional[dict] = None, num_seeds: int = 1024,
                 graspness_threshold: float = 0.1, seed: int = 0, num_views: int = 300,
                 num_angles: int = 12, num_depths: int = 4, crop: Optional[dict] = None,
                 loss: Optional[dict] = None, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, test_cfg: Optional[dict] = None,
                 point_ops: str = 'auto', gripper: Optional[dict] = None):
        super().__init__(backbone, num_seeds, graspness_threshold, seed, num_views,
                         data_preprocessor, init_cfg, test_cfg, point_ops, gripper)
        self.crop = CloudCrop(self.backbone.out_channels, **(crop or {}))
        self.swad_head = SWADHead(self.crop.out_channels, num_angles, num_depths)
        self.assigner = self.build_assigner(assigner or dict(
            type='NearestLabelAssigner', num_views=num_views))
        self.loss_fn = build_in_scope(MODELS, loss or dict(type='GSNetLoss'))
        self.num_depths = num_depths

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        if 'grasp_labels' not in inputs:
            raise KeyError("GSNet.loss needs inputs['grasp_labels']: add SampleGraspLabels and "
                           'PackGraspInputs to the training pipeline')
        out = self._seed_stage(inputs)
        seeds = out['seeds']
        with self.timer('view'):
            generator = batch_generator(data_samples, self.seed, seeds.device)
            view_scores, top_view, seed_features = self._views(out, generator)
        with self.timer('assigner'), explain_deferred_grid_access(type(self.assigner).__name__):
            labels = inputs['grasp_labels']
            matched = self.assigner.assign(seeds, labels)
            matched = self.assigner.match_view(matched, top_view, labels)
        with self.timer('grouper'):
            crops = self.crop(seeds, seed_features, matched.top_view_rot)
        with self.timer('head'):
            score, width = self.swad_head(crops)
        if score.shape != matched.top_scores.shape:
            raise ValueError(f'GSNet predicts (B, Ns, A, D) = {tuple(score.shape)} but the labels '
                             f'give {tuple(matched.top_scores.shape)}: set num_angles/num_depths '
                             f'(and num_views) to the label grid')
        with self.timer('losses'):
            return self.loss_fn(out['objectness'], out['graspness'], inputs['objectness'],
                                inputs['graspness'], view_scores, score, width, matched)

    def predict(self, inputs: dict, data_samples: List[GraspDataSample]
                ) -> List[GraspDataSample]:
        """Each sample gets ``pred_grasps`` (Ns, 17): score, width, height, depth, rotation
        (3×3, row-major), translation, object id (−1), as GraspNet's evaluation expects."""
        out = self._seed_stage(inputs)
        _, top_view, seed_features = self._views(out, None)
        rotations = self.approach_head.view_rotations(top_view)
        score, width = self.swad_head(self.crop(out['seeds'], seed_features, rotations))
        B, Ns, A, D = score.shape
        best_score, best = score.reshape(B, Ns, A * D).max(dim=-1)
        angle = (best // D).float() * math.pi / A
        depth = (best % D + 1).float() * self.gripper.depth_step
        best_width = torch.gather(width.reshape(B, Ns, A * D), 2, best[..., None]).squeeze(-1)
        best_width = (1.2 * best_width / 10).clamp(0, self.gripper.max_width)
        rotation = approach_to_matrix(rotations[..., 0], angle)
        grasps = self.grasp_rows(best_score, best_width, depth, rotation, out['seeds'])
        results = []
        for sample, frame_grasps in zip(data_samples or [GraspDataSample()] * B, grasps):
            sample = sample.clone()
            sample.pred_grasps = frame_grasps.detach()
            results.append(sample)
        return self.filter_collisions(inputs, results)
