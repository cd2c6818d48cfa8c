"""tools/test.py evaluates a GSNet demo checkpoint on synthetic test scenes: it prints the AP
table per split with the settings (labelled as a sample of the split), writes the JSON next to
the dump; --scale-ap adds the AP by grasp width, --frame-stride samples; GraspNetEval.eval_seen
gives the same numbers; --diagnose's counts add up on the model's dump."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mmgrasp.datasets.graspness import generate_graspness
from mmgrasp.datasets.synthetic import write_synthetic_dataset

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='module')
def eval_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('eval') / 'graspnet')
    write_synthetic_dataset(root, scenes=1, frames=2, objects=4, points_per_object=60,
                            grid=(5, 3, 3), image_size=(320, 180), cameras=('realsense', ),
                            seed=0, progress=False, test_scenes=(100, 130))
    generate_graspness(root, 'realsense', None)
    return root


def _config(tmp_path, root):
    path = tmp_path / 'small_gsnet_demo.py'
    path.write_text(f"""
_base_ = ['{REPO}/configs/gsnet_demo.py']
data_root = '{root}'
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root=data_root, pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_graspness=True),
        dict(type='SampleGraspLabels', min_object_points=20, grids='deferred'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
test_dataloader = dict(num_workers=0, dataset=dict(data_root=data_root, pipeline=[
    dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
    dict(type='PackGraspInputs', keys=('points', ),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
test_evaluator = dict(data_root=data_root, nproc=2)
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
train_cfg = dict(max_epochs=1)
""")
    return str(path)


def _run(*args, timeout=600):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_test_tool_prints_the_ap_table(eval_root, tmp_path):
    config = _config(tmp_path, eval_root)
    work_dir, dump = str(tmp_path / 'work'), str(tmp_path / 'dump')
    _run('tools/train.py', config, '--work-dir', work_dir)
    ckpt = os.path.join(work_dir, 'epoch_1.pth')
    out = _run('tools/test.py', config, ckpt, '--dump', dump, '--work-dir', str(tmp_path / 't'))
    table = out.stdout[out.stdout.index('| split |'):]
    rows = {line.split('|')[1].strip(): line for line in table.splitlines() if line.startswith('|')}
    assert {'seen', 'similar', 'all'} <= set(rows) and 'novel' not in rows
    assert rows['seen'].split('|')[2].strip() == '2'  # frames
    assert '| camera | realsense |' in table
    assert '| collision threshold | 0.01 (voxel 0.01 m, approach 0.05 m, masked cloud) |' in table
    assert '| objectness filter | n/a (all seeds, GSNet) |' in table
    assert '| evaluator | mmgrasp-graspnet-1' in table
    with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
        payload = json.load(f)
    figures = payload['figures']
    for key in ('seen/AP', 'seen/AP0.8', 'seen/AP0.4', 'similar/AP', 'AP'):
        assert 0.0 <= figures[key] <= 100.0
    assert payload['settings']['collision threshold'].startswith('0.01')
    assert sorted(os.listdir(os.path.join(dump, 'eval_realsense'))) == ['scene_0100.npz',
                                                                        'scene_0130.npz']
    # 2 of the 90 test scenes, 2 frames each: labelled, and so in the visualisation backend
    label = 'sampled: 4 of 23040 frames, not comparable with published AP'
    assert payload['coverage']['label'] == label and f'**{label}**' in out.stdout
    (scalars, ) = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / 't') for f in fs
                   if f == 'scalars.json']
    with open(scalars) as f:
        logged = [json.loads(line) for line in f]
    assert any(e.get('graspnet_sampled/label') == label and 'graspnet_sampled/AP' in e
               for e in logged)
    assert not any('graspnet/AP' in e for e in logged)

    # the graspnetAPI drop-in on the same dump: graspnetAPI's shapes, tools/test.py's numbers
    from mmgrasp.evaluation import GraspNetEval
    with pytest.warns(UserWarning, match='seen: 1 of 30 scenes'):
        res, ap = GraspNetEval(eval_root, 'realsense').eval_seen(dump, proc=2)
    assert res.shape == (1, 2, 50, 6)
    assert 100 * ap == pytest.approx(figures['seen/AP'], abs=1e-9)

    # the size split and a frame sample
    dump2 = str(tmp_path / 'dump2')
    out = _run('tools/test.py', config, ckpt, '--dump', dump2, '--work-dir',
               str(tmp_path / 't2'), '--scale-ap', '--frame-stride', '2',
               '--collision-thresh', '0')
    assert '| width | split | frames | AP | AP0.8 | AP0.4 |' in out.stdout
    for size in ('small', 'medium', 'large'):
        assert f'| {size} | seen | 1 |' in out.stdout
    with open(os.path.join(dump2, 'graspnet_realsense.json')) as f:
        payload = json.load(f)
    assert payload['coverage']['frame_ids'] == {'100': [0], '130': [0]}
    assert 'sampled: 2 of 23040 frames' in payload['coverage']['label']
    assert np.isfinite([payload['figures'][f'{s}/AP'] for s in ('small', 'medium', 'large')]).all()

    # diagnostics of the model's dump (frame 0 of each scene): the counts add up to the AP's
    sys.path.insert(0, os.path.join(REPO, 'tests', 'unit', 'evaluation'))
    from test_diagnostics import check_diagnostics
    diag = str(tmp_path / 'diag')
    _run('tools/analysis/eval_dump.py', eval_root, dump2, '--camera', 'realsense', '--scenes',
         '100', '130', '--frames', '0', '--diagnose', diag, '--no-progress')
    assert check_diagnostics(eval_root, dump2, diag, [100, 130], frames=[0]) > 0
