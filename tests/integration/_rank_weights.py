"""Test hooks: every rank saves its final weights (parameters; BatchNorm running statistics
are per rank without SyncBatchNorm) and the samples it trained on, so a test can compare the
ranks with each other and with a one-process run."""
import hashlib
import json
import os

import numpy as np
import torch
from mmengine.dist import get_rank
from mmengine.hooks import Hook

from mmgrasp.registry import HOOKS


@HOOKS.register_module(force=True)
class SaveRankWeightsHook(Hook):

    def after_run(self, runner) -> None:
        model = getattr(runner.model, 'module', runner.model)
        weights = {name: p.detach() for name, p in model.named_parameters()}
        torch.save(weights, os.path.join(runner.work_dir, f'weights_rank{get_rank()}.pth'))


def sample_digest(points: torch.Tensor, labels) -> str:
    """What a sample trained on: its points and, per labelled object, id, pose and label rows."""
    digest = hashlib.sha1(points.numpy().tobytes())
    for label in labels:
        digest.update(np.int64(label.object_id).tobytes())
        digest.update(label.pose.numpy().tobytes())
        digest.update(label.points.numpy().tobytes())
        if label.is_deferred:
            digest.update(np.asarray(label.deferred.rows).tobytes())
            digest.update(np.int64(label.deferred.collision_offset).tobytes())
    return digest.hexdigest()


@HOOKS.register_module(force=True)
class SaveRankSamplesHook(Hook):
    """``samples_rank{r}.json``: [epoch, sample_idx, digest] of every sample, in training order."""

    def before_run(self, runner) -> None:
        self.samples = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        for sample, points in zip(data_batch['data_samples'], data_batch['inputs']['points']):
            self.samples.append([int(sample.epoch), int(sample.sample_idx),
                                 sample_digest(points, sample.grasp_labels)])

    def after_run(self, runner) -> None:
        with open(os.path.join(runner.work_dir, f'samples_rank{get_rank()}.json'), 'w') as f:
            json.dump(self.samples, f)
