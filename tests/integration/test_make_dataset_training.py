"""From meshes a package ships to AP in one command: three of pybullet_data's random objects
(scaled to metres by their URDFs' 0.015) through tools/data/make_dataset.py (11 scenes), then
GSNet's demo recipe trained on the result through the label store and tested with
tools/test.py, on a small gripper grid and images."""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pybullet_data = pytest.importorskip('pybullet_data')
pytest.importorskip('trimesh')

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBJECTS = (9, 23, 33)  # single closed bodies among random_urdfs
GRIPPER = "dict(num_views=6, num_angles=3, num_depths=2)"


def _run(*args, env, timeout=900):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_package_meshes_to_a_trained_and_evaluated_gsnet(tmp_path):
    meshes = tmp_path / 'meshes'
    meshes.mkdir()
    scales = set()
    for i in OBJECTS:
        folder = os.path.join(pybullet_data.getDataPath(), 'random_urdfs', f'{i:03d}')
        urdf = ET.parse(os.path.join(folder, f'{i:03d}.urdf'))
        scales.add(urdf.find('.//collision/geometry/mesh').get('scale'))
        shutil.copy(os.path.join(folder, f'{i:03d}.obj'), meshes / f'{i:03d}.obj')
    assert scales == {'0.015 0.015 0.015'}
    env = dict(os.environ, MMGRASP_CACHE=str(tmp_path / 'cache'),
               PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    root = tmp_path / 'mine'
    out = _run('tools/data/make_dataset.py', str(meshes), str(root), '--scale', '0.015',
               '--scenes', '10', '--test-scenes', '1', '--views', '2', '--cameras',
               'realsense', '--image-size', '320', '180', '--voxel-size', '0.02',
               '--sdf-resolution', '0.004', '--sdf-backend', 'numpy', '--gripper',
               'num_views=6', 'num_angles=3', 'num_depths=2', '--nproc', '2', env=env)
    assert out.stdout.count('3 objects at rest') == 11
    scenes = sorted(os.listdir(root / 'scenes'))
    assert scenes == [f'scene_{s:04d}' for s in [*range(10), 100]]
    config = tmp_path / 'mine.py'
    config.write_text(f"""
_base_ = ['{REPO}/configs/gsnet_demo.py']
data_root = '{root}'
gripper = {GRIPPER}
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root=data_root, pipeline=[
        dict(type='LoadGraspScene', num_points=1000, with_graspness=True),
        dict(type='SampleGraspLabels', min_object_points=20, gripper=gripper),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
test_dataloader = dict(num_workers=0, dataset=dict(data_root=data_root, pipeline=[
    dict(type='LoadGraspScene', num_points=1000, with_masked_cloud=True),
    dict(type='PackGraspInputs', keys=('points', ),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
test_evaluator = dict(data_root=data_root, gripper=gripper, nproc=1)
train_cfg = dict(max_epochs=1)
model = dict(num_seeds=32, num_views=6, num_angles=3, num_depths=2, gripper=gripper,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=6))
""")
    work = tmp_path / 'work'
    _run('tools/train.py', str(config), '--work-dir', str(work), env=env)
    out = _run('tools/test.py', str(config), str(work / 'epoch_1.pth'), '--work-dir',
               str(tmp_path / 'test'), env=env)
    assert 'AP' in out.stdout
    with open(tmp_path / 'test' / 'dump' / 'graspnet_realsense.json') as f:
        result = json.load(f)
    assert result['coverage']['frames'] == 2
    ap = result['figures']['AP']
    assert ap == ap and 0 <= ap <= 100  # finite
