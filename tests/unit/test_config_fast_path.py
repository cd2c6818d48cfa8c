"""Every shipped config takes the fast path without an option: frames from the frame store (the
image store for image recipes) in every train, val and test pipeline, the augmentation applied
on the device in every recipe that can take it (those without voxel coordinates or labels posed
in the worker), the visible-label test on the device wherever label grids are deferred."""
import glob
import os

import pytest
from mmengine.config import Config

from mmgrasp.datasets.transforms import (LoadGraspScene, LoadRGBDImage, RandomFlipRotateScene,
                                         SampleGraspLabels)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = sorted(glob.glob(os.path.join(REPO, 'configs', '*.py')))


def pipelines(cfg: Config):
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(loader):
            yield loader, cfg[loader].dataset.pipeline


def built(step: dict):
    kind = {'LoadGraspScene': LoadGraspScene, 'LoadRGBDImage': LoadRGBDImage,
            'RandomFlipRotateScene': RandomFlipRotateScene, 'SampleGraspLabels': SampleGraspLabels}
    return kind[step['type']](**{k: v for k, v in step.items() if k != 'type'})


@pytest.mark.parametrize('path', CONFIGS, ids=os.path.basename)
def test_shipped_configs_read_frames_and_augment_on_the_device(path):
    cfg = Config.fromfile(path)
    for loader, pipeline in pipelines(cfg):
        loads = [built(t) for t in pipeline if t['type'] == 'LoadGraspScene']
        images = [built(t) for t in pipeline if t['type'] == 'LoadRGBDImage']
        assert loads or images, (loader, 'no frame loading step')
        assert all(t.source == 'frames' for t in loads + images), (loader, loads + images)
        flips = [built(t) for t in pipeline if t['type'] == 'RandomFlipRotateScene']
        # voxel coordinates are packed in the worker; normals computed there must be flipped there
        worker_only = any(t.voxel_size is not None for t in loads) or any(
            t['type'] == 'EstimateNormals' and t.get('apply', 'worker') == 'worker'
            for t in pipeline)
        for flip in flips:
            assert flip.apply == ('worker' if worker_only else 'device'), (loader, flip)
        # the visible-label test on the device wherever the grids are deferred
        for labels in (built(t) for t in pipeline if t['type'] == 'SampleGraspLabels'):
            assert labels.visible_test == ('device' if labels.grids == 'deferred' else 'worker')
