"""Settings the tools refuse in one line, not a traceback: a config whose gripper is not the one
its labels were made for (tools/train.py and tools/test.py), and a malformed ``--gripper``
value of the label generator (naming the key)."""
import importlib.util
import os

import pytest

from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.geometry import build_gripper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _main(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3],
                                                  os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.fixture(scope='module')
def small_gripper_root(tmp_path_factory):
    """A dataset labelled on a 6 x 3 x 2 grid, with the gripper.json that says so."""
    root = str(tmp_path_factory.mktemp('small_gripper') / 'data')
    write_synthetic_dataset(root, scenes=1, frames=1, objects=2, models=2, points_per_object=20,
                            grid=(6, 3, 2), image_size=(160, 90), cameras=('realsense', ),
                            test_scenes=(100, ), progress=False)
    gripper = build_gripper(dict(num_views=6, num_angles=3, num_depths=2))
    with open(os.path.join(root, 'grasp_label', 'gripper.json'), 'w') as f:
        f.write(gripper.to_json())
    return root


def test_train_refuses_labels_of_another_gripper_in_one_line(small_gripper_root, tmp_path):
    with pytest.raises(SystemExit) as err:
        _main('tools/train.py')([
            'configs/graspnet_baseline_demo.py', '--work-dir', str(tmp_path / 'work'),
            '--cfg-options', f'train_dataloader.dataset.data_root={small_gripper_root}',
            'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False'])
    message = str(err.value.code)
    assert '\n' not in message and message.startswith('error: two grippers in one run')
    assert 'SampleGraspLabels.gripper' in message and 'grid 300x12x4' in message
    assert 'grasp_label/gripper.json' in message and 'grid 6x3x2' in message
    assert not os.path.exists(tmp_path / 'work' / 'epoch_1.pth')


@pytest.mark.parametrize('value, key', [('max_width=abc', 'max_width'),
                                        ('num_views=2.5', 'num_views'),
                                        ('fingers=0.01', 'fingers')])
def test_label_generator_names_the_malformed_gripper_key(tmp_path, capsys, value, key):
    out = tmp_path / 'out'
    rc = _main('tools/data/generate_grasp_labels.py')([str(tmp_path), str(out), '--gripper',
                                                      value])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and '\n' not in err and key in err and value in err, err
    assert not out.exists()  # refused before anything was written
