"""configs/gsnet_gc6d_demo.py, shrunk to the session GraspClutter6D data: one training epoch,
then tools/test.py prints the AP table with GraspClutter6D's protocol settings and writes the
dumps by image id and the figures' JSON."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(tmp_path, root):
    path = tmp_path / 'small_gsnet_gc6d_demo.py'
    path.write_text(f"""
_base_ = ['{REPO}/configs/gsnet_gc6d_demo.py']
data_root = '{root}'
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root=data_root, pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_graspness=True),
        dict(type='SampleGraspLabels', min_object_points=20, grids='deferred'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root=data_root, pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
        dict(type='PackGraspInputs', keys=('points', ),
             meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
test_evaluator = dict(data_root=data_root)
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5),
             test_cfg=dict(collision_thresh=0.1))
train_cfg = dict(max_epochs=1)
""")
    return str(path)


def _run(*args, timeout=600):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, 'PYTHONPATH': os.pathsep.join(
                             [REPO, os.environ.get('PYTHONPATH', '')])})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_gc6d_demo_checkpoint_gets_the_protocol_table(gc6d_root, tmp_path):
    config = _config(tmp_path, gc6d_root)
    work_dir, dump = str(tmp_path / 'work'), str(tmp_path / 'dump')
    _run('tools/train.py', config, '--work-dir', work_dir)
    out = _run('tools/test.py', config, os.path.join(work_dir, 'epoch_1.pth'), '--dump', dump,
               '--work-dir', str(tmp_path / 't'))
    assert 'GraspClutter6D evaluation of' in out.stdout
    table = out.stdout[out.stdout.index('| split |'):]
    rows = {line.split('|')[1].strip(): line for line in table.splitlines() if line.startswith('|')}
    assert rows['all'].split('|')[2].strip() == '3'  # scene 3: 3 of its 13 images on disk
    assert '**sampled: 3 of 13 frames, not comparable with published AP**' in out.stdout
    for line in ('| camera | realsense-d435 |', '| max width | 0.14 m |',
                 '| table in collision check | none |', '| evaluator | mmgrasp-graspclutter6d-1',
                 '| background filter | 0.05 m from 8 mm voxel-sampled model points |',
                 '| annotations | 13 a scene and camera |'):
        assert line in table, line
    assert sorted(os.listdir(os.path.join(dump, '000003', 'realsense-d435'))) == \
        ['000002.npy', '000006.npy', '000010.npy']  # image id = 4 * annotation + 2
    assert np.load(os.path.join(dump, '000003', 'realsense-d435', '000002.npy')).shape[1] == 17
    with open(os.path.join(dump, 'graspclutter6d_realsense-d435.json')) as f:
        payload = json.load(f)
    assert payload['scenes'] == [3] and payload['test_split'] is False
    assert payload['coverage']['details'] == 'scene 3: annotations 0-2'
    for key in ('AP', 'AP0.4', 'AP0.8'):
        assert 0.0 <= payload['figures'][key] <= 100.0
