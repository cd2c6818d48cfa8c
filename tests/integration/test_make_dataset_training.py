"""From meshes a package ships to AP in one command: three of pybullet_data's random objects
(scaled to metres by their URDFs' 0.015) through tools/data/make_dataset.py (11 scenes), then
GSNet's demo recipe trained on the result through the label store and tested with
tools/test.py, on a small gripper grid and images."""
import os
import shutil
import xml.etree.ElementTree as ET

import pytest
from _own_labels import REPO, run_tool, train_and_test

pybullet_data = pytest.importorskip('pybullet_data')
pytest.importorskip('trimesh')

OBJECTS = (9, 23, 33)  # single closed bodies among random_urdfs


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
    out = run_tool('tools/data/make_dataset.py', str(meshes), str(root), '--scale', '0.015',
                   '--scenes', '10', '--test-scenes', '1', '--views', '2', '--cameras',
                   'realsense', '--image-size', '320', '180', '--voxel-size', '0.02',
                   '--sdf-resolution', '0.004', '--sdf-backend', 'numpy', '--gripper',
                   'num_views=6', 'num_angles=3', 'num_depths=2', '--nproc', '2', env=env)
    assert out.stdout.count('3 objects at rest') == 11
    scenes = sorted(os.listdir(root / 'scenes'))
    assert scenes == [f'scene_{s:04d}' for s in [*range(10), 100]]
    _, _, result = train_and_test(root, tmp_path, env)
    assert result['coverage']['frames'] == 2
