"""From meshes alone to AP: the synthetic objects exported as PLY meshes, labelled by
tools/data/generate_grasp_labels.py, scene collisions by generate_collision_labels.py on the
synthetic writer's scene folders (standing in for a simulator's), the label store built, GSNet's
demo recipe trained and tested on it with the labels' gripper (a small grid) set in the model,
the label sampling and the evaluator."""
import os
import shutil

import pytest
from mmengine.config import Config

from mmgrasp.apis import register_all_modules
from mmgrasp.apis.config_check import check_grippers
from mmgrasp.datasets.graspness import generate_graspness
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from _own_labels import REPO, train_and_test
from _scripts import script_module


def _tool(name):
    """A tools/data script's main(), run in this process (no interpreter start per step)."""
    return script_module(f'tools/data/{name}.py').main


@pytest.mark.slow
def test_meshes_to_a_trained_and_evaluated_gsnet(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    shapes = ['box', 'lshape', 'box', 'lshape']
    write_synthetic_dataset(str(tmp_path / 'syn'), scenes=1, frames=2, objects=3, models=4,
                            points_per_object=40, grid=(6, 3, 2), image_size=(320, 180),
                            cameras=('realsense', ), test_scenes=(100, ), shapes=shapes,
                            progress=False)
    assert _tool('export_synthetic_meshes')([str(tmp_path / 'meshes'), '--models', '4',
                                             '--shapes', *shapes, '--points-per-object',
                                             '40']) == 0
    root = tmp_path / 'mine'
    shutil.copytree(tmp_path / 'syn' / 'scenes', root / 'scenes')  # poses and depth only
    labels = [str(tmp_path / 'meshes'), str(root), '--sdf-backend', 'numpy',
              '--sdf-resolution', '0.004', '--voxel-size', '0.012',
              '--gripper', 'num_views=6', 'num_angles=3', 'num_depths=2', '--nproc', '2']
    assert _tool('generate_grasp_labels')(labels) == 0
    assert sorted(os.listdir(root / 'grasp_label')) == [
        f'{i:03d}_labels.{ext}' for i in range(4) for ext in ('json', 'npz')] + ['gripper.json']
    stamps = [os.stat(root / 'grasp_label' / f'{i:03d}_labels.npz').st_mtime_ns
              for i in range(4)]
    assert _tool('generate_grasp_labels')(labels) == 0  # resumable: nothing redone
    assert stamps == [os.stat(root / 'grasp_label' / f'{i:03d}_labels.npz').st_mtime_ns
                      for i in range(4)]
    assert _tool('generate_collision_labels')([str(root)]) == 0
    _tool('build_label_store')([str(root)])
    generate_graspness(str(root))
    config, _, result = train_and_test(root, tmp_path, env)
    assert result['gripper']['num_views'] == 6 and result['coverage']['frames'] == 2
    # a config with GraspNet's gripper on these labels is refused, naming both
    mixed = tmp_path / 'mixed.py'
    mixed.write_text(config.read_text().replace('model = dict(num_seeds=32, num_views=6, '
                                                'num_angles=3, num_depths=2, gripper=gripper,',
                                                'model = dict(num_seeds=32, num_views=6, '
                                                'num_angles=3, num_depths=2,'))
    register_all_modules()
    with pytest.raises(SystemExit, match='two grippers'):
        check_grippers(Config.fromfile(str(mixed)), str(mixed))
