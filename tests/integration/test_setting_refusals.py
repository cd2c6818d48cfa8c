"""Settings the tools refuse in one line, not a traceback: a config whose gripper is not the one
its labels were made for, a Scale-Balanced-Grasp width statistic with empty bins (naming the
option that fixes it), and a malformed ``--gripper`` value of the label generator (naming the
key)."""
import os

import pytest
from mmengine.config import Config, DictAction

from mmgrasp.apis import apply_cli_options, register_all_modules
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.geometry import build_gripper
from _scripts import script_module


def _write(root, grid):
    write_synthetic_dataset(root, scenes=1, frames=1, objects=2, models=2, points_per_object=20,
                            grid=grid, image_size=(160, 90), cameras=('realsense', ),
                            test_scenes=(100, ), progress=False)
    return root


@pytest.fixture(scope='module')
def small_gripper_root(tmp_path_factory):
    """A dataset labelled on a 6 x 3 x 2 grid, with the gripper.json that says so."""
    root = _write(str(tmp_path_factory.mktemp('small_gripper') / 'data'), (6, 3, 2))
    gripper = build_gripper(dict(num_views=6, num_angles=3, num_depths=2))
    with open(os.path.join(root, 'grasp_label', 'gripper.json'), 'w') as f:
        f.write(gripper.to_json())
    return root


def _train_refusal(config, root, work, *options):
    with pytest.raises(SystemExit) as err:
        script_module('tools/train.py').main([
            config, '--work-dir', str(work), '--cfg-options',
            f'train_dataloader.dataset.data_root={root}', 'train_dataloader.num_workers=0',
            'train_dataloader.persistent_workers=False', *options])
    assert not os.path.exists(work / 'epoch_1.pth')
    message = str(err.value.code)
    assert '\n' not in message, message
    return message


def test_train_refuses_labels_of_another_gripper_in_one_line(small_gripper_root, tmp_path):
    message = _train_refusal('configs/graspnet_baseline_demo.py', small_gripper_root,
                             tmp_path / 'work')
    assert message.startswith('error: two grippers in one run')
    assert 'SampleGraspLabels.gripper' in message and 'grid 300x12x4' in message
    assert 'grasp_label/gripper.json' in message and 'grid 6x3x2' in message


def test_empty_width_bins_name_the_option_that_fixes_them(tmp_path):
    """Two frames leave most of Scale-Balanced-Grasp's 32 width bins empty: the refusal names
    ``min_count`` with the --cfg-options key of this config's hook, and that key is accepted."""
    root = _write(str(tmp_path / 'data'), (300, 12, 4))
    config = 'configs/scale_balanced_demo.py'
    message = _train_refusal(config, root, tmp_path / 'work', 'custom_hooks.1.min_count=None')
    assert message.startswith('error: ScaleStatisticHook: ') and 'width bins count no' in message
    option = message.split('--cfg-options ')[1].rstrip(')')
    assert option == 'custom_hooks.1.min_count=1'
    register_all_modules()
    parser = DictAction(option_strings=[], dest='cfg')
    namespace = type('Namespace', (), {})()
    parser(None, namespace, [option])
    cfg = apply_cli_options(Config.fromfile(config), config, namespace.cfg, str(tmp_path))
    assert cfg.custom_hooks[1] == dict(type='ScaleStatisticHook', num_frames=16, min_count=1)


@pytest.mark.parametrize('value, key', [('max_width=abc', 'max_width'),
                                        ('num_views=2.5', 'num_views'),
                                        ('fingers=0.01', 'fingers')])
def test_label_generator_names_the_malformed_gripper_key(tmp_path, capsys, value, key):
    out = tmp_path / 'out'
    rc = script_module('tools/data/generate_grasp_labels.py').main(
        [str(tmp_path), str(out), '--gripper', value])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and '\n' not in err and key in err and value in err, err
    assert not out.exists()  # refused before anything was written
