"""configs/gsnet_demo_val.py: a training validates after every epoch on a sampled split
(GraspNetMetric on frame 0 of each scene), and graspnet/AP per epoch lands in the log's
vis_data/scalars.json, where analyze_logs.py plots it. (The session dataset holds training
scenes only: here the split is None; the demo's own split='test' with frames=[0] is labelled
sampled by the coverage check.)"""
import glob
import json
import math
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_demo_val_config_validates_every_epoch(synthetic_root, tmp_path):
    config = tmp_path / 'val_small.py'
    config.write_text(f"""
_base_ = ['{REPO}/configs/gsnet_demo_val.py']
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5),
             test_cfg=dict(collision_thresh=0.1))
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{synthetic_root}', pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_graspness=True),
        dict(type='SampleGraspLabels', min_object_points=20, grids='dense'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
val_dataloader = dict(dataset=dict(data_root='{synthetic_root}', split='train', pipeline=[
    dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
    dict(type='PackGraspInputs', keys=('points', ),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
val_evaluator = dict(data_root='{synthetic_root}', split=None, dump_dir='{tmp_path}/val_dump')
train_cfg = dict(max_epochs=2)
default_hooks = dict(checkpoint=dict(interval=2))
""")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    work = tmp_path / 'work'
    out = subprocess.run([sys.executable, 'tools/train.py', str(config), '--work-dir', str(work)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (scalars,) = glob.glob(str(work / '*' / 'vis_data' / 'scalars.json'))
    with open(scalars) as f:
        records = [json.loads(line) for line in f]
    val = [r for r in records if 'graspnet/AP' in r]
    assert [r['step'] for r in val] == [1, 2], val  # one validation per epoch
    assert all(math.isfinite(r['graspnet/AP']) for r in val)
    assert all(r['graspnet/frames'] == 2 for r in val), val  # frame 0 of scenes 0 and 1
    with open(tmp_path / 'val_dump' / 'graspnet_realsense.json') as f:
        assert json.load(f)['scenes'] == [0, 1]
    plot = tmp_path / 'ap.png'
    drawn = subprocess.run([sys.executable, 'tools/analysis/analyze_logs.py', 'plot_curve',
                            scalars, '--keys', 'graspnet/AP', '--out', str(plot)], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=120)
    assert drawn.returncode == 0 and plot.stat().st_size > 0, drawn.stderr
