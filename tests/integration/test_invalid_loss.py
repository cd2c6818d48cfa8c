"""InvalidLossHook, on by default (configs/_base_/default_runtime.py): a real Runner training on
the synthetic dataset, poisoned on purpose at one iteration, stops there with a message naming
the iteration, every loss term and the (epoch, sample_idx) of each frame of the batch; no
checkpoint of the poisoned model is written; with the hook switched off the same run goes on
to its end with non-finite weights (what happened before the hook)."""
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmgrasp.engine.hooks import InvalidLossHook, NonFiniteLossError
from mmgrasp.registry import HOOKS, MODELS

from _tiny_model import TinyGraspModel, tiny_config

POISONED_ITER = 3  # 1-based, as logged: the last batch of epoch 0 (3 batches of 2 frames)

HOOKS_LINE = "custom_hooks = [dict(type='ConfigHashHook'), dict(type='RecordFrames')]\n"


@MODELS.register_module(force=True)
class PoisonedGraspModel(TinyGraspModel):
    """TinyGraspModel whose ``poison_at``-th training forward (1-based) adds a NaN loss term
    (``kind='loss'``) or a term of value 0 whose gradient is NaN (``kind='gradient'``:
    d/dw sqrt(0·w) = 0 / (2·sqrt(0)))."""

    def __init__(self, poison_at: int, kind: str, data_preprocessor=None):
        super().__init__(data_preprocessor)
        self.poison_at, self.kind, self.calls = poison_at, kind, 0

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = super().forward(inputs, data_samples, mode)
        if mode != 'loss':
            return out
        self.calls += 1
        zero = self.fc.weight.sum() * 0
        if self.calls == self.poison_at:
            if self.kind == 'loss':
                zero = zero + float('nan')
            else:
                zero = torch.sqrt(self.fc.weight * 0).sum()
        return dict(out, loss_poison=zero)


@HOOKS.register_module(force=True)
class RecordFrames(Hook):
    """(epoch, sample_idx) of the frames each iteration started with."""

    priority = 'HIGHEST'

    def __init__(self):
        self.frames = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.frames.append([(s.epoch, s.sample_idx) for s in data_batch['data_samples']])


def build_runner(synthetic_root, work_dir, kind, with_hook=True, **options) -> Runner:
    path = os.path.join(work_dir, 'poisoned.py')
    os.makedirs(work_dir, exist_ok=True)
    with open(path, 'w') as f:
        f.write(tiny_config(synthetic_root, epochs=2, checkpoint_interval=1, extra=HOOKS_LINE,
                            model=f"dict(type='PoisonedGraspModel', poison_at={POISONED_ITER}, "
                                  f"kind='{kind}')"))
    cfg = Config.fromfile(path)
    cfg.merge_from_dict(dict(work_dir=work_dir, experiment_name=f'invalid_loss_{kind}_'
                             f'{os.path.basename(work_dir)}', **options))
    if not with_hook:
        del cfg.default_hooks['invalid_loss']
    return Runner.from_cfg(cfg)


def frames_of(runner: Runner):
    return next(h for h in runner.hooks if isinstance(h, RecordFrames)).frames


def test_invalid_loss_hook_is_on_by_default(synthetic_root, tmp_path):
    runner = build_runner(synthetic_root, str(tmp_path), 'loss')
    hooks = [h for h in runner.hooks if isinstance(h, InvalidLossHook)]
    assert len(hooks) == 1 and hooks[0].interval == 1 and hooks[0].check_parameters
    names = [type(h).__name__ for h in runner.hooks]  # before the logger and checkpoint hooks
    assert names.index('InvalidLossHook') < names.index('LoggerHook') < \
        names.index('CheckpointHook')


def test_invalid_loss_stops_at_the_first_nan_loss_and_names_the_batch(synthetic_root, tmp_path):
    runner = build_runner(synthetic_root, str(tmp_path), 'loss')
    with pytest.raises(NonFiniteLossError) as error:
        runner.train()
    message = str(error.value)
    frames = frames_of(runner)
    assert len(frames) == POISONED_ITER  # stopped at once
    assert f'a non-finite loss at iteration {POISONED_ITER} (epoch 0, batch 2 ' in message
    assert 'loss_poison=nan' in message
    for term in ('loss=nan', 'loss_scene=', 'loss_labels='):
        assert term in message, term
    scene = message.split('loss_scene=')[1].split(',')[0]
    assert float(scene) == float(scene)  # the finite terms are printed as numbers
    for epoch, index in frames[-1]:
        assert f'(epoch={epoch}, sample_idx={index}, scene=' in message
    assert 'dataset[(epoch, sample_idx)]' in message
    saved = sorted(f for f in os.listdir(tmp_path) if f.startswith('iter_'))
    assert saved == [f'iter_{i}.pth' for i in range(1, POISONED_ITER)]  # none of the NaN model


def test_invalid_loss_catches_a_nan_gradient_under_a_finite_loss(synthetic_root, tmp_path):
    runner = build_runner(synthetic_root, str(tmp_path), 'gradient')
    with pytest.raises(NonFiniteLossError) as error:
        runner.train()
    message = str(error.value)
    assert len(frames_of(runner)) == POISONED_ITER
    assert (f'a non-finite weight after the optimizer step (the gradient was not finite): '
            f'fc.weight at iteration {POISONED_ITER} ') in message
    assert 'loss_poison=0. ' in message  # the last term, finite
    for epoch, index in frames_of(runner)[-1]:
        assert f'(epoch={epoch}, sample_idx={index}, ' in message


def test_invalid_loss_switched_off_lets_the_run_go_on_with_nan(synthetic_root, tmp_path):
    """What a run did before the hook: every later iteration trains on NaN weights."""
    runner = build_runner(synthetic_root, str(tmp_path), 'gradient', with_hook=False)
    runner.train()
    assert len(frames_of(runner)) == 6
    assert not torch.isfinite(runner.model.fc.weight).all()
