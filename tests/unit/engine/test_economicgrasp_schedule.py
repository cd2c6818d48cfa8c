"""EconomicGrasp's schedule (configs/_base_/schedules/adam_cosine_10e.py) gives the reference
train.py's learning rate at every epoch: 0.001 · (cos(π · epoch / 10) + 1) / 2, Adam without
weight decay."""
import math
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import PARAM_SCHEDULERS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SCHEDULE = os.path.join(REPO, 'configs', '_base_', 'schedules', 'adam_cosine_10e.py')


def reference_lr(epoch: int, max_epoch: int = 10, lr: float = 0.001) -> float:
    """get_current_lr of EconomicGrasp's train.py @7361bb6."""
    return lr * (math.cos(epoch / max_epoch * math.pi) + 1) * 0.5


def test_lr_per_epoch_equals_the_reference():
    cfg = Config.fromfile(SCHEDULE)
    model = torch.nn.Linear(3, 2)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    optimizer = wrapper.optimizer
    assert isinstance(optimizer, torch.optim.Adam)
    assert optimizer.defaults['weight_decay'] == 0 and optimizer.defaults['fused'] is True
    assert cfg.train_cfg.max_epochs == 10
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=wrapper))
                  for s in cfg.param_scheduler]
    seen = []
    for epoch in range(cfg.train_cfg.max_epochs):
        seen.append(optimizer.param_groups[0]['lr'])
        for _ in range(3):  # iterations of the epoch do not move the lr
            model(torch.ones(1, 3)).sum().backward()
            wrapper.step()
            wrapper.zero_grad()
            assert optimizer.param_groups[0]['lr'] == seen[-1]
        for scheduler in schedulers:
            scheduler.step()
    assert seen == pytest.approx([reference_lr(e) for e in range(10)], rel=1e-12, abs=1e-18)
    # a mutant schedule (GSNet's 0.95 per epoch) is told apart
    assert seen != pytest.approx([0.001 * 0.95 ** e for e in range(10)], rel=1e-6)
