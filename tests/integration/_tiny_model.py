"""A model small enough for whole trainings in tests, whose updates depend on every sample of
every batch (its points and its label points), so a replayed or skipped batch shows in the
weights, and the config that trains it (:func:`tiny_config`). Imported by the tests and, through
``custom_imports``, by configs run with tools/train.py (PYTHONPATH=tests/integration)."""
import os
from typing import Optional

import torch
from mmengine.model import BaseModel
from torch import nn

from mmgrasp.registry import MODELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_CONFIG = """
_base_ = ['{repo}/configs/_base_/default_runtime.py', '{repo}/configs/_base_/schedules/adam_10e.py']
custom_imports = dict(imports=['_tiny_model'], allow_failed_imports=False)
model = {model}
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='EpochAwareSampler', shuffle=True),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type='GraspNetDataset', data_root='{root}', seed=3, pipeline=[
        dict(type='LoadGraspScene', num_points=400),
        dict(type='SampleGraspLabels', grids='deferred', min_points=10, min_object_points=20),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs')]))
train_cfg = dict(max_epochs={epochs})
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(by_epoch=False, interval={checkpoint_interval},
                                     max_keep_ckpts=-1))
"""


def tiny_config(root: str, epochs: int, checkpoint_interval: int,
                model: str = "dict(type='TinyGraspModel')", extra: str = '') -> str:
    """Config text: ``model`` (a config expression) trained on the dataset at ``root`` with
    GSNet's optimizer, in 2-frame batches shuffled by EpochAwareSampler, deferred labels, a
    checkpoint every ``checkpoint_interval`` iterations, then the lines of ``extra``."""
    return _CONFIG.format(repo=REPO, root=root, model=model, epochs=epochs,
                          checkpoint_interval=checkpoint_interval) + extra


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
