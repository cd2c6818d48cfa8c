"""EconomicGrasp (Wu et al., ECCV 2024; iSEE-Laboratory/EconomicGrasp ``models/
economicgrasp.py`` @7361bb6): GSNet's backbone, graspable mask and view head, then cylinder
grouping with attention and a grasp head that classifies angle, depth and score."""
import math
from typing import Dict, List, Optional

import torch
from torch import Tensor

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.storage.labels.economic import MAX_WIDTH as ECONOMIC_MAX_WIDTH
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.structures.grasp_labels import explain_deferred_grid_access
from ..heads.economic_heads import InteractiveCylinderCrop, InteractiveGraspHead
from mmgrasp.geometry.grasp_frames import approach_to_matrix
from .graspness_seeds import GraspnessSeedDetector, batch_generator


@MODELS.register_module()
class EconomicGrasp(GraspnessSeedDetector):
    """Backbone → objectness/graspness → graspable mask + FPS seeds → view scores (drawn view
    in training, argmax at inference; GSNet's stages, :class:`GraspnessSeedDetector`) →
    (training) label assignment → cylinder crops with
    attention → angle/depth/score classes and width.

    The assigner (EconomicGrasp's ``process_grasp_labels``) runs inside :meth:`loss`, after
    the seeds and their views are chosen: with deferred labels that is where the economic rows
    of the matched label points are read. Every random draw of the model (the view per seed,
    the attention dropout masks) comes from the batch's generator, a function of (seed, epoch,
    sample indices) only.

    Args:
        backbone: per-point feature network, (B, N, 3) -> (B, C, N), with ``out_channels``
            (EconomicGrasp's ``TDUnet`` is GSNet's MinkUNet14D: :class:`SparseUNet14`).
        assigner: the label assigner (``EconomicAssigner``).
        num_seeds: seeds per frame (1024).
        graspness_threshold: graspable points have predicted graspness above this (0.1).
        seed: seed of the model's own draws.
        num_views, num_angles, num_depths: V, A, D of the labels (300, 12, 4).
        crop: :class:`InteractiveCylinderCrop` options; head: :class:`InteractiveGraspHead`
            options; loss: :class:`EconomicGraspLoss` by default.
        point_ops: the point-op backend (see :class:`GraspDetector`).
        gripper: see :class:`GraspDetector`; at most 0.1 m wide (the economic labels' mask).
    """

    score_label = 'Σ 0.2k·logit_k (raw logits, not 0-1)'

    #: the crop module after the view selection (FineGrasp swaps in its multi-scale crop)
    crop_type = InteractiveCylinderCrop

    def __init__(self, backbone: dict, assigner: Optional[dict] = None, num_seeds: int = 1024,
                 graspness_threshold: float = 0.1, seed: int = 0, num_views: int = 300,
                 num_angles: int = 12, num_depths: int = 4, crop: Optional[dict] = None,
                 head: Optional[dict] = None, loss: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None, init_cfg: Optional[dict] = None,
                 test_cfg: Optional[dict] = None, point_ops: str = 'auto',
                 gripper: Optional[dict] = None):
        super().__init__(backbone, num_seeds, graspness_threshold, seed, num_views,
                         data_preprocessor, init_cfg, test_cfg, point_ops, gripper)
        if self.gripper.max_width > ECONOMIC_MAX_WIDTH:
            raise ValueError(f'{type(self).__name__}: gripper {self.gripper.describe()} opens '
                             f'wider than {ECONOMIC_MAX_WIDTH} m, the width its economic labels '
                             f'are masked at (mmgrasp/storage/labels/economic.py); use a '
                             f'gripper of at most {ECONOMIC_MAX_WIDTH} m')
        self.crop = self.crop_type(self.backbone.out_channels, **(crop or {}))
        self.grasp_head = InteractiveGraspHead(self.crop.out_channels, num_angles, num_depths,
                                               **(head or {}))
        self.assigner = self.build_assigner(assigner or dict(
            type='EconomicAssigner', num_views=num_views))
        self.loss_fn = build_in_scope(MODELS, loss or dict(type='EconomicGraspLoss'))
        self.num_angles = num_angles

    def _grasp_stage(self, out: Dict[str, Tensor], rotations: Tensor, seed_features: Tensor,
                     generator: Optional[torch.Generator]) -> Dict[str, Tensor]:
        with self.timer('grouper'):
            crops = self.crop(out['seeds'], seed_features, rotations, generator)
        with self.timer('head'):
            return self.grasp_head(crops, generator)

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        missing = [i for i, s in enumerate(data_samples or [None])
                   if s is None or 'economic_labels' not in s]
        if missing:
            raise KeyError(f'{type(self).__name__}.loss needs each data sample\'s economic_labels (none '
                           f'in samples {missing}): add LoadEconomicLabels and PackGraspInputs '
                           f'to the training pipeline')
        out = self._seed_stage(inputs)
        with self.timer('view'):
            generator = batch_generator(data_samples, self.seed, out['seeds'].device)
            view_scores, top_view, seed_features = self._views(out, generator)
        with self.timer('assigner'), explain_deferred_grid_access(type(self.assigner).__name__):
            targets = self.assigner.assign(out['seeds'], top_view,
                                           [s.economic_labels for s in data_samples])
        pred = self._grasp_stage(out, targets['batch_grasp_view_rot'], seed_features, generator)
        if pred['angle'].shape[1] != self.num_angles + 1 or \
                targets['batch_grasp_view_graspness'].shape != view_scores.shape:
            raise ValueError(f'{type(self).__name__} predicts {self.num_angles + 1} angle classes and '
                             f'view scores {tuple(view_scores.shape)}; the labels give view '
                             f'graspness {tuple(targets["batch_grasp_view_graspness"].shape)}: '
                             f'set num_views/num_angles to the labels')
        with self.timer('losses'):
            return self.loss_fn(out['objectness'], out['graspness'], inputs['objectness'],
                                inputs['graspness'], view_scores, pred, targets)

    def predict(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None
                ) -> List[GraspDataSample]:
        """Each sample gets ``pred_grasps`` (Ns, 17) as GraspNet's evaluation expects (the
        reference's ``pred_decode``): score = Σ 0.2·k · score logit k (raw logits), width =
        clamp(1.2 · w / 10, 0, max width), height, depth = (argmax + 1) · depth step (the
        gripper's: 0.1, 0.02, 0.01 for GraspNet's), rotation of
        the argmax view and angle argmax · π / A, translation the seed, object id −1."""
        out = self._seed_stage(inputs)
        _, top_view, seed_features = self._views(out, None)
        rotations = self.approach_head.view_rotations(top_view)
        pred = self._grasp_stage(out, rotations, seed_features, None)
        score = self.grasp_head.composite_score(pred['score'])
        angle = pred['angle'].argmax(dim=1).float() * math.pi / self.num_angles
        depth = (pred['depth'].argmax(dim=1) + 1).float() * self.gripper.depth_step
        width = (1.2 * pred['width'] / 10).clamp(0, self.gripper.max_width)
        rotation = approach_to_matrix(rotations[..., 0], angle)
        grasps = self.grasp_rows(score, width, depth, rotation, out['seeds'])
        results = []
        for sample, frame_grasps in zip(data_samples or [GraspDataSample()] * len(grasps),
                                        grasps):
            sample = sample.clone()
            sample.pred_grasps = frame_grasps.detach()
            results.append(sample)
        return self.filter_collisions(inputs, results)
