"""GraspNet-baseline (Fang et al., CVPR 2020) and Scale-Balanced-Grasp (Ma & Huang, CoRL 2022):
PointNet++ seeds → approach views and objectness → (training) label matching → per-depth
cylinder crops → score, angle, width and tolerance per depth."""
import inspect
import math
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import Tensor

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.grasp_labels import explain_deferred_grid_access
from mmgrasp.structures.data_sample import GraspDataSample
from ..backbones import pointnet2  # noqa: F401  (registers the backbones)
from ..heads import graspnet_heads  # noqa: F401  (registers the heads)
from ..losses.graspnet_loss import GRASP_MAX_TOLERANCE
from mmgrasp.geometry.grasp_frames import approach_to_matrix
from .base import GraspDetector


def _with_defaults(cfg: dict, **defaults) -> dict:
    """``cfg`` with each default filled in where its class takes that argument."""
    cfg = dict(cfg)
    cls = MODELS.get(cfg['type']) if isinstance(cfg['type'], str) else cfg['type']
    if cls is None:
        raise KeyError(f'{cfg["type"]!r} is not registered in mmgrasp MODELS')
    accepted = inspect.signature(cls).parameters
    for key, value in defaults.items():
        if key in accepted:
            cfg.setdefault(key, value)
    return cfg


@MODELS.register_module()
class GraspNetBaseline(GraspDetector):
    """GraspNet-baseline (graspnet-baseline models/graspnet.py).

    The backbone chooses the seeds (FPS inside its SA levels); the approach head predicts
    objectness and view scores per seed, and the top view is the argmax of the predicted view
    scores, in training and at inference. The assigner runs inside :meth:`loss`, after the
    seeds are chosen: with deferred grids that is where the label rows are read. In training
    the crops are centred on the matched label points along their label view rotations; at
    inference on the seeds along the predicted template views. The wall time of each part is in
    ``self.timer`` (backbone, seed_selection, view, assigner, grouper, head, losses).

    Args:
        backbone: (B, N, 3) -> dict of ``seed_features`` (B, C, Ns), ``seed_inds`` (B, Ns)
            (:class:`PointNet2Backbone`).
        approach: the view/objectness head (:class:`ApproachNet`).
        crop: the per-depth crop (:class:`DepthCloudCrop`); ``num_depths`` (and, where taken,
            ``in_channels`` and ``hmax``: the gripper's depths) are filled in.
        operation, tolerance: per-depth heads (:class:`OperationNet`, :class:`ToleranceNet`).
        assigner: BL's NearestLabelAssigner options by default.
        loss: :class:`GraspNetBaselineLoss` by default.
        num_views, num_angles, num_depths: V, A, D of the label grid (300, 12, 4).
        objectness_filter: at inference keep only seeds predicted on an object (BL's
            ``pred_decode``); off by default, so ``pred_grasps`` has one row per seed and
            ``pred_objectness`` gives the probability to filter with later.
        gripper: the gripper (widths, depths, height, collision filter; see GraspDetector).

    Inputs (after GraspDataPreprocessor): ``points`` (B, N, 3), ``objectness`` (B, N) int64,
    ``grasp_labels`` (GraspLabelBatch; training).
    """

    score_label = 'score × tolerance / 0.05'

    def __init__(self, backbone: Optional[dict] = None, approach: Optional[dict] = None,
                 crop: Optional[dict] = None, operation: Optional[dict] = None,
                 tolerance: Optional[dict] = None, assigner: Optional[dict] = None,
                 loss: Optional[dict] = None, num_views: int = 300, num_angles: int = 12,
                 num_depths: int = 4, objectness_filter: bool = False,
                 data_preprocessor: Optional[dict] = None, init_cfg: Optional[dict] = None,
                 test_cfg: Optional[dict] = None, point_ops: str = 'auto',
                 gripper: Optional[dict] = None):
        super().__init__(data_preprocessor, init_cfg, test_cfg, point_ops, gripper)
        self.backbone = build_in_scope(MODELS, backbone or self.default_backbone())
        channels = self.backbone.out_channels
        self.approach = build_in_scope(MODELS, _with_defaults(
            approach or dict(type='ApproachNet'), in_channels=channels, num_views=num_views))
        # each depth class crops up to its depth: (d + 1) * the gripper's depth step
        hmax = tuple(round((d + 1) * self.gripper.depth_step, 10) for d in range(num_depths))
        self.crop = build_in_scope(MODELS, _with_defaults(
            crop or self.default_crop(), num_depths=num_depths, in_channels=channels,
            hmax=hmax))
        self.operation = build_in_scope(MODELS, _with_defaults(
            operation or dict(type='OperationNet'), in_channels=self.crop.out_channels,
            num_angles=num_angles))
        self.tolerance = build_in_scope(MODELS, _with_defaults(
            tolerance or dict(type='ToleranceNet'), in_channels=self.crop.out_channels,
            num_angles=num_angles))
        assigner = dict(assigner or self.default_assigner())
        assigner.setdefault('num_views', num_views)
        self.assigner = self.build_assigner(assigner)
        self.loss_fn = build_in_scope(MODELS, loss or self.default_loss())
        self.num_views, self.num_angles, self.num_depths = num_views, num_angles, num_depths
        self.objectness_filter = objectness_filter

    # defaults a subclass changes
    @staticmethod
    def default_backbone() -> dict:
        return dict(type='PointNet2Backbone')

    @staticmethod
    def default_crop() -> dict:
        return dict(type='DepthCloudCrop')

    @staticmethod
    def default_assigner() -> dict:
        return dict(type='NearestLabelAssigner', all_view_widths=True, with_tolerance=True,
                    view_graspness=False, gsnet_score_norm=False, distance_cutoff=False)

    @staticmethod
    def default_loss() -> dict:
        return dict(type='GraspNetBaselineLoss')

    def _seed_stage(self, inputs: dict) -> Dict[str, Tensor]:
        """Backbone, seeds and the approach head: seeds (B, Ns, 3), seed_features (B, C, Ns),
        seed_inds (B, Ns), objectness logits (B, 2, Ns), view_scores (B, Ns, V), top_view
        (B, Ns)."""
        points = inputs['points']
        with self.timer('backbone'):
            out = self.backbone(points)
        with self.timer('seed_selection'):
            seed_inds = out['seed_inds']
            xyz = points[..., :3]
            seeds = torch.gather(xyz, 1, seed_inds[..., None].expand(-1, -1, 3))
            stage = dict(seeds=seeds, seed_features=out['seed_features'], seed_inds=seed_inds)
            if 'objectness' in inputs:
                stage['seed_objectness'] = torch.gather(inputs['objectness'], 1, seed_inds)
        with self.timer('view'):
            stage['objectness'], stage['view_scores'] = self.approach(out['seed_features'])
            stage['top_view'] = self.approach.choose_views(stage['view_scores'])
        return stage

    def _heads(self, centres: Tensor, points: Tensor, rotations: Tensor,
               seed_features: Tensor):
        with self.timer('grouper'):
            crops = self.crop(centres, points[..., :3].contiguous(), rotations, seed_features)
        with self.timer('head'):
            score, angle, width = self.operation(crops)
            tolerance = self.tolerance(crops)
        return score, angle, width, tolerance

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        for key in ('grasp_labels', 'objectness'):
            if key not in inputs:
                raise KeyError(f"{type(self).__name__}.loss needs inputs[{key!r}]: add "
                               f"SampleGraspLabels and PackGraspInputs(keys=('points', "
                               f"'objectness')) to the training pipeline")
        stage = self._seed_stage(inputs)
        with self.timer('assigner'), explain_deferred_grid_access(type(self.assigner).__name__):
            labels = inputs['grasp_labels']
            matched = self.assigner.assign(stage['seeds'], labels)
            matched = self.assigner.match_view(matched, stage['top_view'], labels)
        score, angle, width, tolerance = self._heads(
            matched.point, inputs['points'], matched.top_view_rot, stage['seed_features'])
        B, A, Ns, D = score.shape
        if (B, Ns, A, D) != tuple(matched.top_scores.shape) or \
                stage['view_scores'].shape != matched.view_labels.shape:
            views = tuple(stage['view_scores'].shape)
            raise ValueError(f'{type(self).__name__} predicts views {views} and (B, Ns, A, D) = '
                             f'{(B, Ns, A, D)} but the labels give '
                             f'{tuple(matched.view_labels.shape)} and '
                             f'{tuple(matched.top_scores.shape)}: set num_views/num_angles/'
                             f'num_depths to the label grid')
        with self.timer('losses'):
            return self.loss_fn(stage['objectness'], stage['seed_objectness'],
                                stage['view_scores'], score, angle, width, tolerance, matched)

    def _grasp_scores(self, score: Tensor, tolerance: Tensor, objectness: Tensor) -> Tensor:
        """BL: score × tolerance / 0.05 (``objectness`` (B, Ns) is unused)."""
        return score * tolerance / GRASP_MAX_TOLERANCE

    def predict(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None
                ) -> List[GraspDataSample]:
        """Each sample gets ``pred_grasps`` (Ns, 17): score, width, height (the gripper's),
        depth, rotation (3×3, row-major), translation (the seed), object id (−1), as GraspNet's
        evaluation expects (BL ``pred_decode``: angle = argmax of the angle logits per depth,
        depth = argmax of the score over depths, score × tolerance / 0.05, width 1.2·pred
        clamped to [0, the gripper's maximum]); and ``pred_objectness`` (Ns,) the predicted
        object probability.
        With ``objectness_filter`` only the seeds predicted on an object are kept."""
        stage = self._seed_stage(inputs)
        seeds, top_view = stage['seeds'], stage['top_view']
        score, angle_logits, width, tolerance = self._heads(
            seeds, inputs['points'], self.approach.view_rotations(top_view),
            stage['seed_features'])
        B, A, Ns, D = score.shape
        angle_class = angle_logits.argmax(dim=1, keepdim=True)  # (B, 1, Ns, D)
        score, width, tolerance = (torch.gather(t, 1, angle_class).squeeze(1)
                                   for t in (score, width, tolerance))
        depth_class = score.argmax(dim=2, keepdim=True)  # (B, Ns, 1)
        score, width, tolerance, angle_class = (
            torch.gather(t, 2, depth_class).squeeze(2)
            for t in (score, width, tolerance, angle_class.squeeze(1)))
        object_prob = torch.softmax(stage['objectness'], dim=1)[:, 1]
        score = self._grasp_scores(score, tolerance, object_prob)
        width = (1.2 * width).clamp(0, self.gripper.max_width)
        depth = (depth_class.squeeze(2) + 1).float() * self.gripper.depth_step
        angle = angle_class.float() * math.pi / A
        rotation = approach_to_matrix(self.approach.approaches(top_view), angle)
        grasps = self.grasp_rows(score, width, depth, rotation, seeds)
        if self.objectness_filter:  # one host read; rows kept by index (a mask: nonzero each)
            on_object = (stage['objectness'].argmax(dim=1) == 1).cpu().numpy()
            kept = [torch.from_numpy(np.flatnonzero(m)).to(seeds.device) for m in on_object]
        results = []
        for b, sample in enumerate(data_samples or [GraspDataSample() for _ in range(B)]):
            sample = sample.clone()
            keep = kept[b] if self.objectness_filter else slice(None)
            sample.pred_grasps = grasps[b][keep].detach()
            sample.pred_objectness = object_prob[b][keep].detach()
            results.append(sample)
        return self.filter_collisions(inputs, results)


@MODELS.register_module()
class ScaleBalancedGrasp(GraspNetBaseline):
    """Scale-Balanced-Grasp (SBG ``GraspNet_MSCQ``): GraspNet-baseline with the light Point
    Transformer backbone, multi-scale cylinder crops (r = 0.08 m at 0.25/0.5/0.75/1·r, fused,
    plus gated seed features), the ScaleBalancedAssigner (width-bin weights, robust-graspable
    targets) and :class:`ScaleBalancedGraspLoss`. At inference the score is also multiplied by
    the predicted object probability.

    The assigner needs the scale statistic before the first training step: add
    ``dict(type='ScaleStatisticHook')`` to ``custom_hooks`` or pass ``scale_statistic`` to the
    assigner. Arguments as :class:`GraspNetBaseline`.
    """

    score_label = 'score × P(object) × tolerance / 0.05'

    @staticmethod
    def default_backbone() -> dict:
        return dict(type='PointTransformerLightBackbone')

    @staticmethod
    def default_crop() -> dict:
        return dict(type='MultiScaleCloudCrop', radius=0.08)

    @staticmethod
    def default_assigner() -> dict:
        return dict(type='ScaleBalancedAssigner')

    @staticmethod
    def default_loss() -> dict:
        return dict(type='ScaleBalancedGraspLoss')

    def _grasp_scores(self, score: Tensor, tolerance: Tensor, objectness: Tensor) -> Tensor:
        """SBG: score × P(object) × tolerance / 0.05."""
        return score * objectness * tolerance / GRASP_MAX_TOLERANCE
