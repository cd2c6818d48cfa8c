"""A test hook: every rank saves its final weights (parameters; BatchNorm running statistics
are per rank without SyncBatchNorm), so a test can compare the ranks."""
import os

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
