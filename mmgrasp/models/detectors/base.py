"""What every grasp detector shares: mmengine's forward modes, part timing, the grasp rows."""
from typing import Dict, List, Optional

import torch
from mmengine.model import BaseModel
from torch import Tensor

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from ..utils.grasp_geometry import GRASP_HEIGHT
from ..utils.part_timer import PartTimer


class GraspDetector(BaseModel):
    """Base of the detectors: ``forward(inputs, data_samples, mode)`` dispatches to
    :meth:`loss`, :meth:`predict` or :meth:`_seed_stage` ('tensor'); ``self.timer`` collects
    the wall time of the parts (backbone, seed_selection, view, assigner, grouper, head,
    losses) for benchmarks."""

    def __init__(self, data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(data_preprocessor=build_in_scope(
            MODELS, data_preprocessor or dict(type='GraspDataPreprocessor')), init_cfg=init_cfg)
        self.timer = PartTimer()

    def forward(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None,
                mode: str = 'tensor'):
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

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        raise NotImplementedError

    def predict(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None
                ) -> List[GraspDataSample]:
        raise NotImplementedError

    @staticmethod
    def grasp_rows(score: Tensor, width: Tensor, depth: Tensor, rotation: Tensor,
                   translation: Tensor) -> Tensor:
        """(B, Ns, 17) rows in graspnetAPI's order: score, width, height, depth, rotation
        (3×3, row-major), translation, object id (−1: unknown)."""
        B, Ns = score.shape
        return torch.cat([score[..., None], width[..., None],
                          torch.full_like(score, GRASP_HEIGHT)[..., None], depth[..., None],
                          rotation.reshape(B, Ns, 9), translation,
                          torch.full_like(score, -1)[..., None]], dim=-1)
