"""Options that would change nothing are refused before the Runner prints the config: unknown
top-level keys (with a "did you mean"), file variables set on the command line, options a
registered class does not take (named by dotted key, with the names it takes), and an
evaluator camera that is not the dataset's. Every shipped config passes."""
import glob
import os
import subprocess
import sys

import pytest
from mmengine.config import Config

from mmgrasp.apis import apply_cli_options, register_all_modules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEMO = os.path.join(REPO, 'configs', 'gsnet_demo.py')
CONFIGS = sorted(glob.glob(os.path.join(REPO, 'configs', '*.py')))


@pytest.fixture(autouse=True, scope='module')
def _registered():
    register_all_modules(False)


def _apply(options, path=DEMO):
    return apply_cli_options(Config.fromfile(path), path, options, None)


@pytest.mark.parametrize('path', CONFIGS, ids=os.path.basename)
def test_every_shipped_config_passes(path):
    assert len(CONFIGS) >= 13
    _apply(None, path)


@pytest.mark.parametrize('options, message', [
    ({'load_from_partail': True}, "top-level 'load_from_partail'; did you mean "
                                  "'load_from_partial'?"),
    ({'max_epoch': 3}, "top-level 'max_epoch'; did you mean 'train_cfg.max_epochs'?"),
    ({'data_root': '/x'}, "'data_root' is a variable of .*changes nothing; set "
                          "train_dataloader.dataset.data_root, test_dataloader.dataset.data_root, "
                          "test_evaluator.data_root instead"),
    ({'model.backbone.backnd': 'spconv'},
     "model.backbone.backnd: SparseUNet14 .* takes no option 'backnd'; did you mean "
     "'backend'\\? It takes: backend, channels,"),
    ({'train_cfg.max_epoch': 3}, "train_cfg.max_epoch: GraspEpochBasedTrainLoop .*did you mean "
                                 "'max_epochs'"),
    ({'train_dataloader.dataset.pipeline.1.grid': 'dense'},
     r"train_dataloader.dataset.pipeline.1.grid: SampleGraspLabels .*did you mean 'grids'"),
    ({'test_dataloader.dataset.frame_strde': 2},
     "test_dataloader.dataset.frame_strde: GraspNetDataset .*did you mean 'frame_stride'"),
    ({'test_evaluator.camera': 'kinect'},
     "test_evaluator.camera='kinect' but test_dataloader.dataset.camera='realsense'"),
    ({'model.tset_cfg.collision_thresh': 0.01},
     "model.tset_cfg: GSNet .* takes no option 'tset_cfg'; did you mean 'test_cfg'"),
    ({'model.num_seeds': '1O24'},
     "model.num_seeds='1O24': GSNet .* takes a number for 'num_seeds' \\(default 1024\\), got "
     "a string"),
    ({'train_dataloader.dataset.pipeline.0.num_points': '4k'},
     "pipeline.0.num_points='4k': LoadGraspScene .* takes a number for 'num_points'"),
])
def test_options_that_change_nothing_are_refused(options, message):
    with pytest.raises(SystemExit, match=message):
        _apply(options)


def test_consistent_and_inherited_options_pass():
    cfg = _apply({'test_dataloader.dataset.camera': 'kinect', 'test_evaluator.camera': 'kinect',
                  'load_from_partial': True, 'train_cfg.max_epochs': 2,
                  'model.backbone.backend': 'torch',
                  'test_dataloader.dataset.serialize_data': False})  # a BaseDataset option
    assert cfg.test_evaluator.camera == 'kinect' and cfg.train_cfg.max_epochs == 2
    gc6d = os.path.join(REPO, 'configs', 'gsnet_gc6d_demo.py')
    # GraspClutter6D's alias names the same camera as the evaluator's full name
    _apply({'test_dataloader.dataset.camera': 'realsense'}, gc6d)
    with pytest.raises(SystemExit, match="test_evaluator.camera='realsense-d435' but "
                                         "test_dataloader.dataset.camera='zivid'"):
        _apply({'test_dataloader.dataset.camera': 'zivid'}, gc6d)


def test_plain_type_names_are_not_imported_as_modules(monkeypatch):
    """Each typed dict is looked up in every registry. A plain name that a registry and its
    parents lack must not reach mmengine's fallback, which imports the name as a module (a
    failed import scanning sys.path each time: 2 566 of them when tools/train.py starts on the
    demo config, most of the check's time). A dotted name is still resolved that way, and its
    options are still checked."""
    from mmengine.registry import registry as mmengine_registry
    real, tried = mmengine_registry.get_object_from_string, []
    monkeypatch.setattr(mmengine_registry, 'get_object_from_string',
                        lambda name: tried.append(name) or real(name))
    _apply(None)
    assert tried == []
    with pytest.raises(SystemExit, match=r"optim_wrapper.optimizer.lrr: torch.optim.Adam .*takes "
                                         r"no option 'lrr'; did you mean 'lr'\?"):
        _apply({'optim_wrapper.optimizer.type': 'torch.optim.Adam',
                'optim_wrapper.optimizer.lrr': 0.1})
    assert 'torch.optim.Adam' in tried


def test_a_misspelt_key_in_the_file_is_refused(tmp_path):
    path = str(tmp_path / 'typo.py')
    with open(path, 'w') as f:
        f.write(f"_base_ = ['{DEMO}']\nload_from_partail = True\nmy_variable = 3\n")
    with pytest.raises(SystemExit, match="top-level 'load_from_partail' is read by nothing; "
                                         "did you mean 'load_from_partial'"):
        _apply(None, path)


@pytest.mark.slow
def test_the_tools_refuse_before_printing_the_config(tmp_path):
    for tool in ('tools/train.py', 'tools/test.py'):
        args = [DEMO] + (['missing.pth'] if tool == 'tools/test.py' else [])
        out = subprocess.run([sys.executable, tool, *args, '--work-dir', str(tmp_path),
                              '--cfg-options', 'model.backbone.backnd=spconv'],
                             cwd=REPO, capture_output=True, text=True, timeout=300,
                             env={**os.environ, 'PYTHONPATH': REPO})
        assert out.returncode != 0
        assert "model.backbone.backnd: SparseUNet14" in out.stderr, out.stderr[-2000:]
        assert 'Config:' not in out.stdout + out.stderr and len(out.stdout) < 2000, tool
