"""FineGrasp's schedule (configs/_base_/schedules/adam_warmup_cosine_10e.py) against the
reference's LambdaLR of ``linear_warmup_with_cosdecay`` (RoboOrchardLab @241bbc6
config_finegrasp_minkunet.py), written here from that file: Adam lr 0.008, weight decay 1e-5,
one epoch of warm-up from 1e-5, cosine whose phase divides by all steps, stepped every
iteration, gradient norm clipped at 10, seed 2025."""
import copy
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

from mmgrasp.registry import PARAM_SCHEDULERS
from mmgrasp.apis import register_all_modules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SCHEDULE = os.path.join(REPO, 'configs', '_base_', 'schedules', 'adam_warmup_cosine_10e.py')
register_all_modules(False)


def reference_lambda(cur_step, warmup_steps, total_steps, min_scale=1e-5):
    if cur_step < warmup_steps:
        return (1 - min_scale) * cur_step / warmup_steps + min_scale
    ratio = (cur_step - warmup_steps) / total_steps
    return (1 - min_scale) * 0.5 * (1 + np.cos(np.pi * ratio)) + min_scale


def run(cfg, epoch_length, steps=None):
    model = torch.nn.Linear(3, 2)
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    schedulers = []
    for s in copy.deepcopy(cfg.param_scheduler):  # as mmengine's Runner builds them
        assert s.pop('convert_to_iter_based')
        cls = PARAM_SCHEDULERS.get(s.pop('type'))
        schedulers.append(cls.build_iter_from_epoch(optimizer=wrapper, epoch_length=epoch_length,
                                                    **s))
    lrs = []
    for _ in range(steps or cfg.train_cfg.max_epochs * epoch_length):
        lrs.append(wrapper.optimizer.param_groups[0]['lr'])
        model(torch.ones(1, 3)).sum().backward()
        wrapper.step()
        wrapper.zero_grad()
        for scheduler in schedulers:
            scheduler.step()
    return lrs, wrapper


@pytest.mark.parametrize('epoch_length', [7, 40])
def test_lr_of_every_step_equals_the_reference(epoch_length):
    cfg = Config.fromfile(SCHEDULE)
    lrs, wrapper = run(cfg, epoch_length)
    total = cfg.train_cfg.max_epochs * epoch_length
    steps_per_epoch = total / cfg.train_cfg.max_epochs  # the reference's float division
    expected = [0.008 * reference_lambda(x, steps_per_epoch * 1, total) for x in range(total)]
    assert lrs == pytest.approx(expected, rel=1e-12, abs=1e-18)
    assert lrs[0] == pytest.approx(0.008 * 1e-5)
    # the phase divides by ALL steps: the end of the schedule is ~0.0245 of the lr, not 0
    assert reference_lambda(total, epoch_length, total) == pytest.approx(0.0245, abs=1e-4)
    assert lrs[-1] / 0.008 > 0.0245
    # mutants: a cosine over the steps after the warm-up only ends at ~0, not at 0.0245
    after = [0.008 * ((1 - 1e-5) * 0.5 * (1 + np.cos(np.pi * (x - epoch_length) /
                                                     (total - epoch_length))) + 1e-5)
             for x in range(total)]
    assert lrs != pytest.approx(after, rel=1e-3)
    opt = wrapper.optimizer
    assert isinstance(opt, torch.optim.Adam) and opt.defaults['weight_decay'] == 1e-5
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=10, norm_type=2)
    assert cfg.train_cfg.max_epochs == 10
    recipe = Config.fromfile(os.path.join(REPO, 'configs', 'finegrasp_deferred.py'))
    assert recipe.randomness.seed == 2025 and recipe.param_scheduler == cfg.param_scheduler


def test_resumed_scheduler_continues_the_same_values():
    """The closed form depends only on the step count, which the state dict carries."""
    cfg = Config.fromfile(SCHEDULE)
    whole, _ = run(cfg, 5)
    model = torch.nn.Linear(3, 2)
    s = dict(copy.deepcopy(cfg.param_scheduler[0]))
    s.pop('type'), s.pop('convert_to_iter_based')
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    first = PARAM_SCHEDULERS.get('WarmupCosineLR').build_iter_from_epoch(
        optimizer=wrapper, epoch_length=5, **s)
    for _ in range(17):
        wrapper.step()
        first.step()
    state = first.state_dict()
    wrapper2 = build_optim_wrapper(torch.nn.Linear(3, 2), cfg.optim_wrapper)
    second = PARAM_SCHEDULERS.get('WarmupCosineLR').build_iter_from_epoch(
        optimizer=wrapper2, epoch_length=5, **s)
    second.load_state_dict(state)
    second.optimizer = wrapper2
    wrapper2.step()
    second.step()
    assert wrapper2.optimizer.param_groups[0]['lr'] == whole[18]


def test_bad_arguments_are_refused():
    wrapper = build_optim_wrapper(torch.nn.Linear(3, 2), dict(optimizer=dict(type='Adam')))
    cls = PARAM_SCHEDULERS.get('WarmupCosineLR')
    with pytest.raises(ValueError, match='finite end'):
        cls(wrapper, warmup=1)
    with pytest.raises(ValueError, match='warmup 12'):
        cls(wrapper, warmup=12, end=10)
