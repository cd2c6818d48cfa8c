"""mmengine 0.10.7 Runner checkpoints resume under torch >= 2.6 (``weights_only=True`` default).

mmengine's loader calls ``torch.load(f, map_location=...)`` and the checkpoint holds the message
hub (HistoryBuffer, numpy arrays, ``getattr(HistoryBuffer, 'min')``), and SBG's OneCycleLR
state its annealing function (``getattr(OneCycleParamScheduler, '_annealing_cos')``).
``import mmgrasp`` allow-lists exactly that (mmgrasp/utils/checkpoint_compat.py); these tests
show resume works with it, fails without it, and that the ``getattr`` stand-in refuses anything
else (each recipe's schedule: test_resume_mid_epoch.py).
"""
import io
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer, MessageHub, MMLogger
from mmengine.model import BaseModel
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from mmengine.visualization import Visualizer
from torch import nn
from torch.utils.data import Dataset

import mmgrasp  # noqa: F401  (registers the allow-list)

MAX_ITERS = 4


class TinyDataset(Dataset):
    """Eight fixed samples: every run and every resumed run sees the same batches."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(8, 3, generator=g)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5]) + 0.3

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return dict(inputs=self.x[i], target=self.y[i])


class TinyRegressor(BaseModel):

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, inputs, target=None, mode='tensor'):
        pred = self.linear(inputs).squeeze(-1)
        if mode == 'loss':
            return dict(loss=((pred - target) ** 2).mean())
        return pred


class RecordIters(Hook):
    """The iteration counter each train step starts from."""

    def __init__(self):
        self.iters = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.iters.append(runner.iter)


def _runner(work_dir: str, name: str, load_from=None, resume=False) -> Runner:
    return Runner(
        model=TinyRegressor(),
        work_dir=work_dir,
        experiment_name=name,  # unique: Runner singletons (logger, visualizer) are keyed by it
        train_dataloader=dict(dataset=TinyDataset(), batch_size=2, num_workers=0,
                              sampler=dict(type='DefaultSampler', shuffle=False),
                              collate_fn=dict(type='default_collate')),
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=MAX_ITERS),
        # momentum and a step schedule: resuming must restore optimizer and scheduler state
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.05, momentum=0.9)),
        param_scheduler=dict(type='MultiStepLR', by_epoch=False, milestones=[3], gamma=0.1),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False)),
        custom_hooks=[RecordIters()],
        randomness=dict(seed=0),
        load_from=load_from,
        resume=resume,
        log_level='WARNING',
    )


def _record(runner: Runner) -> RecordIters:
    return next(h for h in runner.hooks if isinstance(h, RecordIters))


@pytest.fixture(scope='module', autouse=True)
def _forget_runner_globals():
    """Drop the current instances the Runners create (scope 'mmengine', logger, hub, visualizer).

    Left behind, the default scope 'mmengine' makes later tests' ``TRANSFORMS.build`` of mmgrasp
    classes look in mmengine's registries and fail.
    """
    managers = (DefaultScope, MessageHub, MMLogger, Visualizer)
    before = {manager: set(manager._instance_dict) for manager in managers}
    yield
    for manager in managers:
        for name in set(manager._instance_dict) - before[manager]:
            instance = manager._instance_dict.pop(name)
            for handler in getattr(instance, 'handlers', ()):
                handler.close()


@pytest.fixture(scope='module')
def full_run(tmp_path_factory):
    """One uninterrupted run: (its final weights, its work_dir with iter_2.pth and iter_4.pth)."""
    work_dir = str(tmp_path_factory.mktemp('full'))
    runner = _runner(work_dir, 'resume_full')
    runner.train()
    assert _record(runner).iters == [0, 1, 2, 3]
    assert os.path.isfile(os.path.join(work_dir, 'iter_2.pth'))
    return {k: v.clone() for k, v in runner.model.state_dict().items()}, work_dir


def test_resume_matches_uninterrupted_run(full_run, tmp_path):
    final, work_dir = full_run
    runner = _runner(str(tmp_path), 'resume_from_2', load_from=os.path.join(work_dir, 'iter_2.pth'),
                     resume=True)
    runner.train()
    assert _record(runner).iters == [2, 3]  # continued from iteration 2, not from 0
    assert runner.iter == MAX_ITERS
    resumed = runner.model.state_dict()
    assert resumed.keys() == final.keys()
    for key, value in final.items():
        assert torch.equal(resumed[key], value), key


_LOAD = textwrap.dedent('''
    import pickle, sys, torch
    if sys.argv[2] == 'with':
        import mmgrasp  # noqa: F401
    try:
        ckpt = torch.load(sys.argv[1])  # the default, as in mmengine's load_from_local
    except pickle.UnpicklingError as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)
    print(type(ckpt['message_hub']['log_scalars']['train/loss']).__name__)
''')


def _load_in_subprocess(path: str, mmgrasp_imported: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', _LOAD, path,
                           'with' if mmgrasp_imported else 'without'],
                          capture_output=True, text=True, timeout=60)


def test_without_the_allow_list_the_checkpoint_is_refused(full_run):
    _, work_dir = full_run
    path = os.path.join(work_dir, 'iter_2.pth')
    refused = _load_in_subprocess(path, mmgrasp_imported=False)
    assert refused.returncode == 3, refused.stderr
    assert 'HistoryBuffer' in refused.stderr
    loaded = _load_in_subprocess(path, mmgrasp_imported=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == 'HistoryBuffer'


class _Getattr:
    """Pickles as ``getattr(owner, name)``, the way HistoryBuffer stores statistics (and
    protocol-2 pickles store a staticmethod such as OneCycle's ``anneal_func``)."""

    def __init__(self, owner, name: str):
        self.owner, self.name = owner, name

    def __reduce__(self):
        return getattr, (self.owner, self.name)


class _Call:
    """Pickles as ``cls(*args)``."""

    def __init__(self, cls, *args):
        self.cls, self.args = cls, args

    def __reduce__(self):
        return self.cls, self.args


def _saved(value) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save({'stat': value}, buffer)
    buffer.seek(0)
    return buffer


def test_getattr_stand_in_allows_statistics_only():
    loaded = torch.load(_saved(_Getattr(HistoryBuffer, 'min')), weights_only=True)
    assert loaded['stat'] is HistoryBuffer.min
    with pytest.raises((RuntimeError, pickle.UnpicklingError), match='register_statistics'):
        torch.load(_saved(_Getattr(HistoryBuffer, 'register_statistics')), weights_only=True)


def test_one_cycle_annealing_functions_only():
    """OneCycle's annealing staticmethods load; nothing else of the class, and the class name
    gives a checkpoint no scheduler to call."""
    for name in ('_annealing_cos', '_annealing_linear'):
        loaded = torch.load(_saved(_Getattr(OneCycleParamScheduler, name)), weights_only=True)
        assert loaded['stat'] is getattr(OneCycleParamScheduler, name)
    with pytest.raises((RuntimeError, pickle.UnpicklingError), match="'step'"):
        torch.load(_saved(_Getattr(OneCycleParamScheduler, 'step')), weights_only=True)
    with pytest.raises((TypeError, pickle.UnpicklingError), match='not callable'):
        torch.load(_saved(_Call(OneCycleParamScheduler, None, 'lr')), weights_only=True)
