"""The seed stage GSNet, EconomicGrasp and FineGrasp share: a per-point backbone, the graspable
head, seeds sampled among the graspable points, and the approach-view head on the seeds."""
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from mmgrasp.ops.point_ops import furthest_point_sample, gather_points
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from ..heads.gsnet_heads import ApproachHead, GraspableHead
from .base import GraspDetector


def batch_generator(data_samples: List[GraspDataSample], seed: int,
                    device: torch.device) -> torch.Generator:
    """A generator for the model's own random draws, derived from (seed, epoch, sample indices)
    only: dense and deferred runs, any worker count and a resumed run draw the same."""
    keys = [seed] + [int(v) for s in data_samples
                     for v in (s.metainfo.get('epoch', 0), s.metainfo.get('sample_idx', 0))]
    state = int(np.random.SeedSequence(keys).generate_state(1, np.uint64)[0] >> np.uint64(1))
    return torch.Generator(device=device).manual_seed(state)


class GraspnessSeedDetector(GraspDetector):
    """Base of the detectors that choose their seeds by predicted graspness (GSNet and the
    methods built on it, EconomicGrasp and FineGrasp).

    It builds, in this order (the order of the state dict and of the initial draws), the
    ``backbone`` (per-point features, (B, N, 3) -> (B, C, N), with ``out_channels``), the
    ``graspable_head`` (objectness (B, 2, N) and graspness (B, N)) and the ``approach_head``
    (``num_views`` view scores per seed); a subclass adds its crop and grasp head after them.

    :meth:`_seed_stage` is the shared contract: a point is graspable when its objectness argmax
    is 1 and its graspness exceeds ``graspness_threshold``; ``num_seeds`` seeds are drawn by
    furthest point sampling among a frame's graspable points (among all of its points while it
    has none, early in training). :meth:`input_features` is the one place a subclass changes
    what the backbone reads (FineGrasp: xyz and normals). :meth:`_views` runs the view head on
    the seeds: a view drawn per seed from the batch's generator in training, the argmax at
    inference.

    Args:
        backbone: the backbone config.
        num_seeds: seeds per frame.
        graspness_threshold: graspable points have predicted graspness above this.
        seed: seed of the model's own draws (:func:`batch_generator`).
        num_views: approach views of the view head (the label grid's V).
        data_preprocessor, init_cfg, test_cfg, point_ops, gripper: :class:`GraspDetector`'s.
    """

    def __init__(self, backbone: dict, num_seeds: int, graspness_threshold: float, seed: int,
                 num_views: int, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, test_cfg: Optional[dict] = None,
                 point_ops: str = 'auto', gripper: Optional[dict] = None):
        super().__init__(data_preprocessor, init_cfg, test_cfg, point_ops, gripper)
        self.backbone = build_in_scope(MODELS, backbone)
        channels = self.backbone.out_channels
        self.graspable_head = GraspableHead(channels)
        self.approach_head = ApproachHead(channels, num_views)
        self.num_seeds = num_seeds
        self.graspness_threshold = graspness_threshold
        self.seed = seed

    def input_features(self, inputs: dict) -> Optional[Tensor]:
        """(B, N, C_in) features the backbone reads besides the points; None: the backbone's
        default (all ones, GSNet's)."""
        return None

    def _seed_stage(self, inputs: dict) -> Dict[str, Tensor]:
        """``objectness`` (B, 2, N), ``graspness`` (B, N), ``seeds`` (B, Ns, 3) and their
        ``seed_features`` (B, C, Ns)."""
        points, feats = inputs['points'], self.input_features(inputs)
        with self.timer('backbone'):
            features = self.backbone(points) if feats is None else self.backbone(points, feats)
            objectness, graspness = self.graspable_head(features)
        with self.timer('seed_selection'):
            graspable = (objectness.argmax(dim=1) == 1) & (graspness > self.graspness_threshold)
            # early in training nothing may be graspable yet: then every point is eligible
            graspable = graspable | ~graspable.any(dim=1, keepdim=True)
            index = furthest_point_sample(points, self.num_seeds, graspable)
            seeds = torch.gather(points, 1, index[..., None].expand(-1, -1, 3))
            seed_features = gather_points(features, index)
        return dict(objectness=objectness, graspness=graspness, seeds=seeds,
                    seed_features=seed_features)

    def _views(self, out: Dict[str, Tensor], generator: Optional[torch.Generator]
               ) -> Tuple[Tensor, Tensor, Tensor]:
        """(view scores (B, Ns, V), one view per seed (B, Ns), the seed features with the view
        head's hidden features added): views drawn from ``generator`` in training, the argmax
        with None."""
        view_scores, residual = self.approach_head(out['seed_features'])
        top_view = self.approach_head.choose_views(view_scores, generator)
        return view_scores, top_view, out['seed_features'] + residual
