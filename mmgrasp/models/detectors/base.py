"""What every grasp detector shares: mmengine's forward modes, part timing, the grasp rows."""
import inspect
from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from mmengine.model import BaseModel
from mmengine.utils import is_list_of
from torch import Tensor

from mmgrasp.geometry import ModelFreeCollisionDetector
from mmgrasp.geometry.gripper import GripperLike, build_gripper, check_same_gripper
from mmgrasp.ops.numerics import check_choice, log_choices, point_ops_backend
from mmgrasp.registry import MODELS, TASK_UTILS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from ..utils.part_timer import PartTimer


#: Test-time processing (``model.test_cfg``): the reference test scripts' collision filter.
#: ``collision_thresh`` 0 switches it off; ``collision_cloud`` 'masked' filters against the
#: whole masked cloud (the sample's ``masked_cloud``, from LoadGraspScene(with_masked_cloud=True)
#: packed as a meta key), 'input' against the sampled input points.
DEFAULT_TEST_CFG = dict(collision_thresh=0.0, collision_voxel_size=0.01, approach_dist=0.05,
                        collision_cloud='masked')


def _accepted_options(registry, type_name) -> set:
    """Keyword names the registered class ``type_name`` takes through its ``__init__`` chain."""
    cls = type_name if isinstance(type_name, type) else registry.get(type_name)
    names = set()
    for owner in getattr(cls, '__mro__', ()):
        if '__init__' in owner.__dict__ and owner is not object:
            names |= set(inspect.signature(owner.__init__).parameters)
    return names


class GraspDetector(BaseModel):
    """Base of the detectors: ``forward(inputs, data_samples, mode)`` dispatches to
    :meth:`loss`, :meth:`predict` or :meth:`_seed_stage` ('tensor'); ``self.timer`` collects
    the wall time of the parts (backbone, seed_selection, view, assigner, grouper, head,
    losses) for benchmarks. ``test_cfg`` sets the test-time processing (``DEFAULT_TEST_CFG``).
    ``point_ops`` ('auto', 'torch', 'triton'; see :mod:`mmgrasp.ops.numerics`) chooses the
    samplers' and queries' implementation for the forward passes; logged when built.
    ``gripper`` (:class:`mmgrasp.geometry.Gripper` or a dict of its fields; None: GraspNet's)
    sets the decoded widths' maximum, the depths and the grasp height, the collision filter's
    fingers and the assigner's width mask (:meth:`build_assigner`)."""

    #: What the score column of ``pred_grasps`` is, in a few words (a picture's legend): each
    #: method ranks its grasps on its own scale, so scores of two methods do not compare.
    score_label = 'grasp score'

    def __init__(self, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, test_cfg: Optional[dict] = None,
                 point_ops: str = 'auto', gripper: GripperLike = None):
        super().__init__(data_preprocessor=build_in_scope(
            MODELS, data_preprocessor or dict(type='GraspDataPreprocessor')), init_cfg=init_cfg)
        self.point_ops = check_choice('point_ops', point_ops)
        log_choices(type(self).__name__, point_ops=point_ops)
        self.timer = PartTimer()
        self.gripper = build_gripper(gripper)
        unknown = sorted(set(test_cfg or {}) - set(DEFAULT_TEST_CFG))
        if unknown:
            raise ValueError(f'{type(self).__name__}: unknown test_cfg keys {unknown}; '
                             f'known: {sorted(DEFAULT_TEST_CFG)}')
        self.test_cfg = {**DEFAULT_TEST_CFG, **(test_cfg or {})}
        if self.test_cfg['collision_cloud'] not in ('masked', 'input'):
            raise ValueError(f"test_cfg.collision_cloud={self.test_cfg['collision_cloud']!r}: "
                             "expected 'masked' or 'input'")

    def filter_collisions(self, inputs: dict, results: List[GraspDataSample]
                          ) -> List[GraspDataSample]:
        """Drop the predicted grasps that collide with the observed cloud (graspnet-baseline's
        ``ModelFreeCollisionDetector.detect``), as ``test_cfg`` says; per-grasp fields
        (``pred_objectness``) are filtered alike. Each sample keeps how many grasps it had before
        (``grasps_before_collision``): the evaluation tells a frame the model decoded nothing
        for from one the filter emptied."""
        cfg = self.test_cfg
        if cfg['collision_thresh'] <= 0 or not results:
            return results
        # one host read of every frame's grasps (and of the input clouds), not one per frame;
        # the kept rows go back as indices (a boolean mask would cost a nonzero per frame)
        grasps = [sample.pred_grasps for sample in results]
        host_grasps = np.split(torch.cat(grasps).detach().cpu().numpy(),
                               np.cumsum([len(g) for g in grasps])[:-1])
        clouds = (inputs['points'].detach().cpu().numpy()
                  if cfg['collision_cloud'] == 'input' else None)
        for b, sample in enumerate(results):
            if cfg['collision_cloud'] == 'masked':
                if 'masked_cloud' not in sample:
                    raise KeyError("test_cfg.collision_cloud='masked' needs the sample's "
                                   "masked_cloud: add LoadGraspScene(with_masked_cloud=True) "
                                   "and 'masked_cloud' to PackGraspInputs' meta_keys, or set "
                                   "collision_cloud='input'")
                cloud = np.asarray(sample.masked_cloud)
            else:
                cloud = clouds[b]
            detector = ModelFreeCollisionDetector(cloud, cfg['collision_voxel_size'],
                                                  self.gripper)
            collided = detector.detect(host_grasps[b], cfg['approach_dist'],
                                       cfg['collision_thresh'])
            keep = torch.from_numpy(np.flatnonzero(~collided)).to(grasps[b].device)
            sample.grasps_before_collision = len(host_grasps[b])
            sample.pred_grasps = grasps[b][keep]
            if 'pred_objectness' in sample:
                sample.pred_objectness = sample.pred_objectness[keep]
        return results

    def build_assigner(self, cfg):
        """The assigner of ``cfg`` (a config dict or a built assigner) with this detector's
        gripper; one set in ``cfg`` as well must be the same."""
        if not isinstance(cfg, dict):
            return cfg
        cfg = dict(cfg)
        if cfg.get('gripper') is not None:
            check_same_gripper(self.gripper, f'{type(self).__name__}.gripper',
                               build_gripper(cfg['gripper']), f'its assigner {cfg["type"]}')
        if 'gripper' in _accepted_options(TASK_UTILS, cfg['type']):
            cfg['gripper'] = self.gripper
        return build_in_scope(TASK_UTILS, cfg)

    def forward(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None,
                mode: str = 'tensor'):
        with point_ops_backend(self.point_ops):
            return self._forward(inputs, data_samples, mode)

    def _forward(self, inputs: dict, data_samples: Optional[List[GraspDataSample]],
                 mode: str):
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        if mode == 'tensor':
            return self._seed_stage(inputs)
        raise ValueError(f'{type(self).__name__}.forward: mode={mode!r}, expected loss, '
                         f'predict or tensor')

    def _seed_stage(self, inputs: dict) -> Dict[str, Tensor]:
        raise NotImplementedError

    def parse_losses(self, losses: Dict[str, Tensor]) -> Tuple[Tensor, Dict[str, Tensor]]:
        """mmengine's ``BaseModel.parse_losses`` (every term's mean logged, the total of the
        terms whose name holds 'loss' first, as 'loss'), with the total as one stack and one
        sum instead of one add per term, and no mean of a term that already is a scalar
        (mmengine launches a mean and an add per term: 14 kernels for EconomicGrasp's 7). The
        gradients are the same; the logged total may differ from a left-to-right sum in the
        last bit."""
        log_vars = []
        for name, value in losses.items():
            if isinstance(value, Tensor):
                log_vars.append([name, value if value.dim() == 0 else value.mean()])
            elif is_list_of(value, Tensor):
                log_vars.append([name, sum(v.mean() for v in value)])
            else:
                raise TypeError(f'{name} is not a tensor or list of tensors')
        terms = [value for name, value in log_vars if 'loss' in name]
        loss = torch.stack(terms).sum() if terms else torch.zeros(())
        log_vars.insert(0, ['loss', loss])
        return loss, OrderedDict(log_vars)

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        raise NotImplementedError

    def predict(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None
                ) -> List[GraspDataSample]:
        raise NotImplementedError

    def grasp_rows(self, score: Tensor, width: Tensor, depth: Tensor, rotation: Tensor,
                   translation: Tensor) -> Tensor:
        """(B, Ns, 17) rows in graspnetAPI's order: score, width, height (the gripper's), depth,
        rotation (3×3, row-major), translation, object id (−1: unknown)."""
        B, Ns = score.shape
        return torch.cat([score[..., None], width[..., None],
                          torch.full_like(score, self.gripper.height)[..., None],
                          depth[..., None],
                          rotation.reshape(B, Ns, 9), translation,
                          torch.full_like(score, -1)[..., None]], dim=-1)
