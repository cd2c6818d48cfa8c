"""HGGD's schedule (configs/_base_/schedules/adamw_step_15e.py) against its training loop
(THU-VCLab/HGGD train_graspnet.py / train_utils.py, written here from them): AdamW lr 1e-2,
weight decay 1e-2 on every parameter, x0.1 every 5 epochs, 15 epochs; 2 batches a step with
summed gradients clipped by value at 1; the BN-momentum schedule of the image network and the
anchor shift of the first 5 epochs (the hooks), and the model base config."""
import copy
import os
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

from mmgrasp.apis import register_all_modules
from mmgrasp.registry import HOOKS, MODELS, PARAM_SCHEDULERS, build_in_scope

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SCHEDULE = os.path.join(REPO, 'configs', '_base_', 'schedules', 'adamw_step_15e.py')
MODEL = os.path.join(REPO, 'configs', '_base_', 'models', 'hggd.py')
register_all_modules(False)


def small_net(seed=0):
    """No bias before a BatchNorm: a gradient that is 0 but for rounding is where halving it
    changes AdamW's step (it meets eps 1e-8), and such a parameter does not change the loss."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def batches(n):
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(6, 4, generator=gen) * 30, torch.randn(6, 2, generator=gen))
            for _ in range(n)]


def loss_of(net, batch):
    x, y = batch
    return ((net(x) - y) ** 2).sum()  # large gradients: the clip is active


def test_lr_per_epoch_and_weight_decay_everywhere():
    cfg = Config.fromfile(SCHEDULE)
    net = small_net()
    wrapper = build_optim_wrapper(net, copy.deepcopy(cfg.optim_wrapper))
    opt = wrapper.optimizer
    assert isinstance(opt, torch.optim.AdamW) and len(opt.param_groups) == 1
    assert opt.param_groups[0]['weight_decay'] == 1e-2
    assert len(opt.param_groups[0]['params']) == len(list(net.parameters()))  # BN, biases too
    s = copy.deepcopy(cfg.param_scheduler[0])
    scheduler = PARAM_SCHEDULERS.get(s.pop('type'))(optimizer=wrapper, **s)
    lrs = []
    for _ in range(cfg.train_cfg.max_epochs):
        lrs.append(opt.param_groups[0]['lr'])
        scheduler.step()
    assert lrs == pytest.approx([1e-2] * 5 + [1e-3] * 5 + [1e-4] * 5, rel=1e-12)


def reference_steps(windows, seed=0):
    """train_graspnet.py's inner loop: backward per batch (no division), every 2 batches
    clip_grad_value_(1) and AdamW(lr 1e-2, wd 1e-2).step(), zero_grad."""
    net = small_net(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2)
    for window in windows:
        for batch in window:
            loss_of(net, batch).backward()
        torch.nn.utils.clip_grad_value_(net.parameters(), 1)
        opt.step()
        opt.zero_grad()
    return net


def mmengine_steps(windows, optim_wrapper, seed=0):
    net = small_net(seed)
    wrapper = build_optim_wrapper(net, copy.deepcopy(optim_wrapper))
    flat = [b for w in windows for b in w]
    wrapper.initialize_count_status(net, 0, len(flat))
    for batch in flat:
        with wrapper.optim_context(net):
            loss = loss_of(net, batch)
        wrapper.update_params(loss)
    return net


def test_accumulated_steps_equal_the_reference():
    data = batches(6)
    windows = [data[i:i + 2] for i in range(0, 6, 2)]
    cfg = Config.fromfile(SCHEDULE)
    expected = reference_steps(windows)
    ours = mmengine_steps(windows, cfg.optim_wrapper)
    for a, b in zip(ours.parameters(), expected.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)  # eps on the tiniest gradients
    # mutant: clipping the averaged gradient at 1 clips the sum at 2
    literal = copy.deepcopy(cfg.optim_wrapper)
    literal.clip_grad.clip_value = 1.0
    wrong = mmengine_steps(windows, literal)
    assert max(float((a - b).detach().abs().max()) for a, b in zip(wrong.parameters(),
                                                                    expected.parameters())) > 3e-3


def fake_runner(model, epoch):
    return SimpleNamespace(model=model, epoch=epoch)


def test_bn_momentum_hook_on_the_image_network_only():
    cfg = Config.fromfile(SCHEDULE)
    hook = build_in_scope(HOOKS, copy.deepcopy(cfg.custom_hooks[1]))
    model = torch.nn.Module()
    model.anchor_net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2))
    model.local_net = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
    seen = []
    for epoch in range(22):
        hook.before_train_epoch(fake_runner(model, epoch))
        seen.append(model.anchor_net[1].momentum)
    assert seen[:6] == [0.5, 0.5, 0.25, 0.25, 0.125, 0.125]
    assert seen[-1] == 0.001 and min(seen) == 0.001
    assert model.local_net[0].momentum == 0.1
    with pytest.raises(ValueError, match='step >= 1'):
        build_in_scope(HOOKS, dict(type='BNMomentumHook', step=0))


def test_anchor_shift_hook_switches_per_epoch():
    cfg = Config.fromfile(SCHEDULE)
    hook = build_in_scope(HOOKS, copy.deepcopy(cfg.custom_hooks[0]))
    from mmgrasp.models.utils.hggd_anchors import HGGDAnchors
    model = torch.nn.Module()
    model.anchors = HGGDAnchors(threshold=5)
    states = []
    for epoch in range(7):
        model.anchors.total.fill_(3)
        hook.before_train_epoch(fake_runner(model, epoch))
        states.append(model.anchors.shift_enabled)
        assert float(model.anchors.total) == 0 and model.anchors.threshold == 1e6
    assert states == [True] * 5 + [False] * 2
    with pytest.raises(TypeError, match='needs a model with HGGD anchors'):
        hook.before_train_epoch(fake_runner(torch.nn.Linear(2, 2), 0))


def test_model_base_config_builds_the_reference_model():
    cfg = Config.fromfile(MODEL)
    assert cfg.model.data_preprocessor.type == 'HGGDDataPreprocessor'
    if 'HGGDDataPreprocessor' not in MODELS.module_dict:  # built by the image-path branch
        cfg.model.data_preprocessor = dict(type='GraspDataPreprocessor')
    model = build_in_scope(MODELS, cfg.model)
    params = sum(p.numel() for p in model.parameters())
    assert params == 1618921 + 1806669
    assert (model.train_centers, model.test_centers, model.group_points) == (128, 48, 512)
    assert model.loss_fn.reg_weight == 5 and model.loss_fn.offset_weight == 1
