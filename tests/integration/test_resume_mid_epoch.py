"""Resuming from a checkpoint saved mid-epoch continues exactly the uninterrupted run.

One reference training (3 epochs x 3 batches of 2, shuffled, a checkpoint every 2 iterations)
per worker count; resumed runs from its checkpoints must draw the same batches (same
batch_idx, same learning rates), load none of the skipped samples, and end with bit-identical
weights and optimizer state. tools/train.py runs the same config from the command line (and
refuses to resume it under another config), tools/dist_train.sh with two gloo processes.
"""
import collections
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.engine.hooks import config_hash
from mmgrasp.registry import HOOKS

from _scripts import script_module
from _tiny_model import REPO, tiny_config

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCHS, BATCHES = 3, 3  # 6 synthetic frames in batches of 2
RECIPES = ('gsnet_deferred.py', 'graspnet_baseline_deferred.py', 'scale_balanced_deferred.py')

SCHEDULE = """
optim_wrapper = dict(optimizer=dict(lr=0.01))
param_scheduler = [dict(type='ExponentialLR', gamma=0.5, by_epoch=True)]
"""


@HOOKS.register_module(force=True)
class RecordBatches(Hook):
    """What each iteration trained on, as the other hooks see it."""

    priority = 'LOWEST'

    def __init__(self):
        self.records = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.records.append(dict(
            iter=runner.iter, epoch=runner.epoch, batch_idx=batch_idx,
            batches=len(runner.train_dataloader), lr=runner.optim_wrapper.get_lr()['lr'][0],
            samples=[(s.epoch, s.sample_idx) for s in data_batch['data_samples']]))


@pytest.fixture(scope='module')
def config_file(synthetic_root, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp('config') / 'tiny_grasp.py'
    path.write_text(tiny_config(synthetic_root, EPOCHS, checkpoint_interval=2, extra=SCHEDULE))
    return str(path)


@pytest.fixture(scope='module')
def fetch_log(tmp_path_factory):
    """Every ``dataset[idx]`` call, from any process, appended to the file ``path`` names:
    forked loader workers inherit the patched method and the path."""
    state = dict(path=None)
    original = GraspNetDataset.__getitem__

    def getitem(self, idx):
        with open(state['path'], 'a') as f:
            f.write('%d %d\n' % (idx if isinstance(idx, tuple) else (0, idx)))
        return original(self, idx)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(GraspNetDataset, '__getitem__', getitem)
        yield state


def train(config_file: str, work_dir: str, fetch_log: dict, **options) -> dict:
    """Train in-process; return the runner, its per-iteration records and the samples loaded."""
    cfg = Config.fromfile(config_file)
    cfg.merge_from_dict(dict(work_dir=work_dir, experiment_name=os.path.basename(work_dir),
                             **options))
    cfg.custom_hooks = cfg.custom_hooks + [dict(type='RecordBatches')]
    fetch_log['path'] = os.path.join(work_dir, 'fetched.txt')
    os.makedirs(work_dir, exist_ok=True)
    open(fetch_log['path'], 'w').close()
    runner = Runner.from_cfg(cfg)
    runner.train()
    with open(fetch_log['path']) as f:
        fetched = [tuple(map(int, line.split())) for line in f]
    records = next(h for h in runner.hooks if isinstance(h, RecordBatches)).records
    with open(os.path.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        log = f.read()
    return dict(runner=runner, records=records, fetched=fetched, log=log)


@pytest.fixture(scope='module')
def reference(config_file, fetch_log, tmp_path_factory):
    """The uninterrupted run, once per worker count."""
    runs = {}

    def get(num_workers: int) -> dict:
        if num_workers not in runs:
            work_dir = str(tmp_path_factory.mktemp(f'reference_{num_workers}'))
            runs[num_workers] = train(config_file, work_dir, fetch_log,
                                      train_dataloader=dict(num_workers=num_workers))
        return runs[num_workers]

    return get


def assert_same_state(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_state(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_state(x, y)
    else:
        assert a == b


@pytest.mark.parametrize('num_workers, ckpt', [(0, 2), (0, 4), (0, 6), (2, 4)])
def test_mid_epoch_resume_is_the_uninterrupted_run(reference, config_file, fetch_log, tmp_path,
                                                   num_workers, ckpt):
    """iter 2 and 4 are mid-epoch; iter 6 is the last batch of epoch 1, saved by iteration
    before that epoch's end hooks (LR step) ran."""
    ref = reference(num_workers)
    assert len(ref['records']) == EPOCHS * BATCHES
    assert collections.Counter(ref['fetched']) == collections.Counter(
        s for r in ref['records'] for s in r['samples'])  # the instrument sees every load
    assert len({r['lr'] for r in ref['records']}) == EPOCHS  # the schedule steps by epoch

    run = train(config_file, str(tmp_path), fetch_log, resume=True,
                load_from=os.path.join(ref['runner'].work_dir, f'iter_{ckpt}.pth'),
                train_dataloader=dict(num_workers=num_workers))

    assert run['records'] == ref['records'][ckpt:]
    assert collections.Counter(run['fetched']) == collections.Counter(
        s for r in ref['records'][ckpt:] for s in r['samples'])
    runner = run['runner']
    assert (runner.iter, runner.epoch) == (EPOCHS * BATCHES, EPOCHS)
    assert_same_state(runner.model.state_dict(), ref['runner'].model.state_dict())
    assert_same_state(runner.optim_wrapper.state_dict(), ref['runner'].optim_wrapper.state_dict())
    assert_same_state([s.state_dict() for s in runner.param_schedulers],
                      [s.state_dict() for s in ref['runner'].param_schedulers])


@pytest.mark.parametrize('recipe', RECIPES)
def test_resume_under_each_recipe_schedule(config_file, fetch_log, tmp_path_factory, recipe):
    """Each shipped recipe's optimizer and parameter scheduler survive a mid-epoch checkpoint
    read with torch.load's weights-only default (SBG's OneCycleLR pickles its annealing
    function): the resumed run goes on as the uninterrupted one."""
    recipe_cfg = Config.fromfile(os.path.join(REPO, 'configs', recipe))
    schedule = dict(optim_wrapper=recipe_cfg.optim_wrapper,
                    param_scheduler=recipe_cfg.param_scheduler)
    name = os.path.splitext(recipe)[0]
    ref = train(config_file, str(tmp_path_factory.mktemp(f'{name}_full')), fetch_log,
                **schedule)
    run = train(config_file, str(tmp_path_factory.mktemp(f'{name}_resumed')), fetch_log,
                resume=True, load_from=os.path.join(ref['runner'].work_dir, 'iter_4.pth'),
                **schedule)
    built = [type(s).__name__ for s in run['runner'].param_schedulers]
    assert built == [s['type'] for s in recipe_cfg.param_scheduler]
    assert run['records'] == ref['records'][4:]
    assert_same_state(run['runner'].model.state_dict(), ref['runner'].model.state_dict())
    assert_same_state(run['runner'].optim_wrapper.state_dict(),
                      ref['runner'].optim_wrapper.state_dict())
    assert_same_state([s.state_dict() for s in run['runner'].param_schedulers],
                      [s.state_dict() for s in ref['runner'].param_schedulers])


def test_worker_count_does_not_change_the_training(reference):
    """0 and 2 loader workers: the same batches (samples, learning rates) and bit-identical
    final weights and optimizer state (TinyGraspModel's loss reads every sample's points and
    label points, so other label rows would show)."""
    serial, parallel = reference(0), reference(2)
    assert serial['records'] == parallel['records']
    for name, value in serial['runner'].model.state_dict().items():
        assert torch.isfinite(value).all(), name
    assert_same_state(serial['runner'].model.state_dict(), parallel['runner'].model.state_dict())
    assert_same_state(serial['runner'].optim_wrapper.state_dict(),
                      parallel['runner'].optim_wrapper.state_dict())


def test_resume_with_seed_none_keeps_the_sampler_order(reference, config_file, fetch_log,
                                                       tmp_path):
    """With randomness.seed=None the sampler is built with a fresh seed before the checkpoint
    is read; the loop hands it the checkpoint's seed."""
    ref = reference(0)
    run = train(config_file, str(tmp_path), fetch_log, resume=True,
                load_from=os.path.join(ref['runner'].work_dir, 'iter_4.pth'),
                randomness=dict(seed=None), allow_config_mismatch=True)
    assert run['records'] == ref['records'][4:]
    assert "randomness.seed: 0 -> None" in run['log']  # the config guard let it pass, loudly
    assert 'resuming anyway (allow_config_mismatch=True)' in run['log']


def test_mid_epoch_resume_needs_a_skipping_sampler(reference, config_file, fetch_log, tmp_path):
    ref = reference(0)
    with pytest.raises(RuntimeError, match='EpochAwareSampler.*end of an epoch'):
        train(config_file, str(tmp_path), fetch_log, resume=True,
              load_from=os.path.join(ref['runner'].work_dir, 'iter_4.pth'),
              train_dataloader=dict(sampler=dict(type='DefaultSampler')),
              allow_config_mismatch=True)


def run_tool(*command: str, **env: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get('PYTHONPATH', '')]),
               **env)
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=env)


def train_tool(*args: str) -> subprocess.CompletedProcess:
    return run_tool(sys.executable, os.path.join(REPO, 'tools', 'train.py'), *args)


def test_train_tool_arguments(config_file, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '0')
    tool = script_module('tools/train.py')

    def cfg_for(*argv: str, **in_file) -> Config:
        cfg = Config.fromfile(config_file)
        cfg.merge_from_dict(in_file)
        return tool.merge_args(cfg, tool.parse_args([config_file, *argv]))

    assert cfg_for().work_dir == './work_dirs/tiny_grasp'
    assert cfg_for(work_dir='cfg_dir').work_dir == 'cfg_dir'
    assert cfg_for('--work-dir', 'cli', work_dir='cfg_dir').work_dir == 'cli'
    assert (cfg_for().resume, cfg_for().load_from) == (False, None)
    auto = cfg_for('--resume', load_from='x.pth')
    assert (auto.resume, auto.load_from) == (True, None)
    path = cfg_for('--resume', 'c.pth')
    assert (path.resume, path.load_from) == (True, 'c.pth')
    amp = cfg_for('--amp').optim_wrapper
    if torch.cuda.is_available():
        assert (amp.type, amp.loss_scale, amp.optimizer.type) == ('AmpOptimWrapper', 'dynamic',
                                                                  'Adam')
    else:
        assert (amp.type, amp.dtype, amp.optimizer.type) == ('CPUAmpOptimWrapper', 'bfloat16',
                                                             'Adam')
    assert cfg_for('--cfg-options', 'allow_config_mismatch=True').allow_config_mismatch is True

    assert 'model_wrapper_cfg' not in cfg_for()
    ddp = cfg_for('--launcher', 'pytorch', find_unused_parameters=True)
    assert ddp.launcher == 'pytorch'
    if not torch.cuda.is_available():
        assert ddp.model_wrapper_cfg == dict(type='MMDistributedDataParallel', device_ids=None,
                                             broadcast_buffers=False,
                                             find_unused_parameters=True)
        assert ddp.env_cfg.dist_cfg.backend == 'gloo'


@pytest.mark.slow
def test_train_tool_trains_resumes_and_guards_the_config(config_file, tmp_path):
    first = train_tool(config_file, '--work-dir', str(tmp_path / 'a'))
    assert first.returncode == 0, first.stderr[-3000:]
    final = torch.load(tmp_path / 'a' / 'iter_9.pth')
    assert final['meta']['config_hash'] == config_hash(Config.fromfile(config_file))[0]

    # --resume without a path: the work dir's last_checkpoint, here a mid-epoch one
    resumed = tmp_path / 'b'
    resumed.mkdir()
    shutil.copy(tmp_path / 'a' / 'iter_4.pth', resumed)
    (resumed / 'last_checkpoint').write_text(str(resumed / 'iter_4.pth'))
    second = train_tool(config_file, '--work-dir', str(resumed), '--resume')
    assert second.returncode == 0, second.stderr[-3000:]
    assert 'resuming epoch 1 at batch 1 of 3' in second.stdout + second.stderr
    again = torch.load(resumed / 'iter_9.pth')
    assert_same_state(again['state_dict'], final['state_dict'])
    assert_same_state(again['optimizer'], final['optimizer'])

    # --resume PATH under another label storage: refused
    dense = ['--cfg-options', 'train_dataloader.dataset.pipeline.1.grids=dense']
    dense_cfg = Config.fromfile(config_file)
    dense_cfg.merge_from_dict({'train_dataloader.dataset.pipeline.1.grids': 'dense'})
    hashes = (final['meta']['config_hash'], config_hash(dense_cfg)[0])
    refused = train_tool(config_file, '--work-dir', str(tmp_path / 'c'),
                         '--resume', str(tmp_path / 'a' / 'iter_4.pth'), *dense)
    assert refused.returncode != 0
    assert 'RuntimeError: ConfigHashHook' in refused.stderr
    assert all(h in refused.stderr for h in hashes)
    assert "grids: 'deferred' -> 'dense'" in refused.stderr
    assert 'differing top-level keys: train_dataloader\n' in refused.stderr


def free_port() -> str:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return str(s.getsockname()[1])


@pytest.mark.slow
def test_two_cpu_processes_resume_mid_epoch(config_file, tmp_path):
    """tools/dist_train.sh with 2 gloo processes: 3 samples per rank, 2 batches per epoch; the
    checkpoint at iteration 3 is one batch into epoch 1, and each rank skips its own batch."""
    dist_train = os.path.join(REPO, 'tools', 'dist_train.sh')
    every_iter = ['--cfg-options', 'default_hooks.checkpoint.interval=1']
    first = run_tool('bash', dist_train, config_file, '2', '--work-dir', str(tmp_path / 'a'),
                     *every_iter, PORT=free_port())
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    resumed = run_tool('bash', dist_train, config_file, '2', '--work-dir', str(tmp_path / 'b'),
                       '--resume', str(tmp_path / 'a' / 'iter_3.pth'), *every_iter,
                       PORT=free_port())
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert 'resuming epoch 1 at batch 1 of 2' in resumed.stdout + resumed.stderr
    final, again = (torch.load(tmp_path / d / 'iter_6.pth') for d in 'ab')
    assert_same_state(again['state_dict'], final['state_dict'])
    assert_same_state(again['optimizer'], final['optimizer'])
