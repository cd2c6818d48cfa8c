"""A model small enough for whole trainings in tests, whose updates depend on every sample of
every batch (its points and its label points), so a replayed or skipped batch shows in the
weights. Imported by the tests and, through ``custom_imports``, by configs run with
tools/train.py (PYTHONPATH=tests/integration)."""
from typing import Optional

import torch
from mmengine.model import BaseModel
from torch import nn

from mmgrasp.registry import MODELS


@MODELS.register_module(force=True)
class TinyGraspModel(BaseModel):
    """One linear layer over scene points and grasp label points."""

    def __init__(self, data_preprocessor: Optional[dict] = None):
        super().__init__(data_preprocessor=data_preprocessor
                         or dict(type='GraspDataPreprocessor'))
        self.fc = nn.Linear(3, 4)

    def forward(self, inputs: dict, data_samples=None, mode: str = 'tensor'):
        scene = self.fc(inputs['points'])  # (B, N, 4)
        if mode != 'loss':
            return scene
        labels = inputs['grasp_labels']
        target = torch.tensor(labels.points.shape[0] / 100.0)
        # a batch without label points (no object kept) contributes 0, not the NaN of an empty mean
        pred = self.fc(labels.points).sum(-1).sum() / max(labels.points.shape[0], 1)
        return dict(loss_scene=((scene - 1) ** 2).mean(), loss_labels=(pred - target) ** 2)
