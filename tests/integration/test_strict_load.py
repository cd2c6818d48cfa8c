"""Checkpoints are loaded strictly: tools/test.py refuses a checkpoint of another model (it used
to evaluate a partly initialised model and print a plausible AP table with exit 0), and
tools/train.py's ``load_from`` loads in part only under ``load_from_partial=True``, naming what
it did not load."""
import os
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.apis import register_all_modules
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def initial_weights(config: str, path: str) -> dict:
    """Save the initial weights (seed 0) of ``config``'s model as a checkpoint."""
    register_all_modules(False)
    torch.manual_seed(0)
    state = build_in_scope(MODELS, Config.fromfile(config).model).state_dict()
    torch.save({'state_dict': state, 'meta': {}}, path)
    return state


@pytest.mark.slow
def test_test_tool_refuses_the_gsnet_demo_checkpoint_for_graspnet_baseline(synthetic_root,
                                                                            tmp_path):
    checkpoint = str(tmp_path / 'gsnet_demo_init.pth')
    initial_weights(os.path.join(REPO, 'configs', 'gsnet_demo.py'), checkpoint)
    out = run_tool('tools/test.py', 'configs/graspnet_baseline_demo.py', checkpoint,
                   '--work-dir', str(tmp_path / 'work'), '--dump', str(tmp_path / 'dump'),
                   '--cfg-options', f'test_dataloader.dataset.data_root={synthetic_root}',
                   'test_dataloader.dataset.split=train', 'test_dataloader.num_workers=0',
                   'test_dataloader.persistent_workers=False', '--dump-only')
    # --dump-only: the session dataset has no test scenes for the metric; the load is the same
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert f'error: {checkpoint} does not fit the model (GraspNetBaseline); a strict load ' \
           f'refuses it' in out.stderr
    assert 'missing keys (the model has them, the checkpoint does not): backbone.sa.0' \
        in out.stderr
    assert 'unexpected keys (the checkpoint has them, the model does not): backbone.stem' \
        in out.stderr
    assert 'Traceback' not in out.stderr
    assert 'GraspNet-1Billion evaluation' not in out.stdout
    assert not os.path.exists(tmp_path / 'dump')


@pytest.fixture
def changed_checkpoint(small_gsnet_files, tmp_path):
    """The small GSNet's initial weights, each tensor + 1, with one key dropped, one added and
    one of another shape: (path, the saved state, the three keys)."""
    config, _ = small_gsnet_files
    state = initial_weights(config, str(tmp_path / 'unused.pth'))
    state = {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}
    dropped = 'graspable_head.conv.bias'
    reshaped = 'swad_head.conv2.bias'
    del state[dropped]
    state[reshaped] = torch.zeros(len(state[reshaped]) + 1)
    state['extra_head.weight'] = torch.zeros(3)
    path = str(tmp_path / 'changed.pth')
    torch.save({'state_dict': state, 'meta': {}}, path)
    return path, state, (dropped, reshaped, 'extra_head.weight')


@pytest.mark.slow
def test_train_tool_load_from_is_strict_unless_the_config_says_partial(
        small_gsnet_files, changed_checkpoint, tmp_path):
    config, _ = small_gsnet_files
    path, state, (dropped, reshaped, extra) = changed_checkpoint
    options = ['--cfg-options', f'load_from={path}', 'train_cfg.max_epochs=1']

    refused = run_tool('tools/train.py', config, '--work-dir', str(tmp_path / 'strict'),
                       *options)
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert f'error: load_from {path} does not fit the model (GSNet)' in refused.stderr
    for line in (f'1 missing keys (the model has them, the checkpoint does not): {dropped}',
                 f'1 unexpected keys (the checkpoint has them, the model does not): {extra}',
                 f'1 mis-shaped keys: {reshaped}: checkpoint (', 'load_from_partial=True'):
        assert line in refused.stderr, refused.stderr[-2000:]
    assert not os.path.exists(tmp_path / 'strict' / 'epoch_0.pth')

    work_dir = tmp_path / 'partial'
    loaded = run_tool('tools/train.py', config, '--work-dir', str(work_dir), *options,
                      'load_from_partial=True')
    assert loaded.returncode == 0, loaded.stdout[-2000:] + loaded.stderr[-2000:]
    log = loaded.stdout + loaded.stderr
    assert f'load_from {path}: loaded in part (load_from_partial=True); not loaded:' in log
    assert dropped in log and extra in log and f'{reshaped}: checkpoint' in log
    # InitialCheckpointHook saved the weights the training starts from: what fitted is loaded,
    # the rest is as initialised
    register_all_modules(False)
    torch.manual_seed(0)
    init = build_in_scope(MODELS, Config.fromfile(config).model).state_dict()
    start = torch.load(work_dir / 'epoch_0.pth', weights_only=False)['state_dict']
    for key, value in start.items():
        if key in (dropped, reshaped):
            assert torch.equal(value, init[key]), key
        else:
            assert torch.equal(value, state[key]), key


def test_test_tool_takes_the_launcher_of_the_train_tool(monkeypatch):
    """tools/test.py --launcher pytorch sets the config as tools/train.py does (on a CPU-only
    machine: DDP without device ids over gloo)."""
    monkeypatch.setenv('LOCAL_RANK', '0')
    tool = script_module('tools/test.py')
    args = tool.parse_args(['configs/gsnet_demo.py', 'x.pth', '--launcher', 'pytorch'])
    assert args.launcher == 'pytorch'
    from mmgrasp.apis import apply_launcher
    cfg = apply_launcher(Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_demo.py')), args)
    assert cfg.launcher == 'pytorch'
    if not torch.cuda.is_available():
        assert cfg.model_wrapper_cfg.device_ids is None
        assert cfg.env_cfg.dist_cfg.backend == 'gloo'
