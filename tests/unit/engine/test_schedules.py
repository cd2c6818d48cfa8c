"""The recipes' schedules build a fused Adam (a few multi-tensor kernels per step)."""
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.mark.parametrize('schedule', ['adam_10e.py', 'adam_step_18e.py', 'onecycle_18e.py'])
def test_schedule_builds_fused_adam(schedule):
    cfg = Config.fromfile(os.path.join(REPO, 'configs', '_base_', 'schedules', schedule))
    model = torch.nn.Linear(3, 2)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    assert isinstance(wrapper.optimizer, torch.optim.Adam)
    assert wrapper.optimizer.defaults['fused'] is True
    model(torch.ones(1, 3)).sum().backward()
    before = model.weight.detach().clone()
    wrapper.step()
    assert not torch.equal(before, model.weight)
