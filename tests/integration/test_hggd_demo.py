"""configs/hggd_demo.py on synthetic frames at GraspNet-1Billion's native 1280 x 720 (HGGD's
per-image grasps are projected there): tools/train.py builds the per-image grasp store on first
use and trains (epoch_0.pth, the untrained weights, beside the last checkpoint), then
tools/test.py evaluates both checkpoints on the test scenes and prints the GraspNet AP table.
One short epoch on two frames: a check that the chain runs and its numbers are finite, not of
how well the demo learns (docs/notes/benchmarks/demos.md has the full demo's figures)."""
import json
import os
import subprocess
import sys

import pytest

from mmgrasp.datasets import transforms  # noqa: F401 (registers them)
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.registry import TRANSFORMS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')])}

pytestmark = pytest.mark.skipif(
    'LoadRGBDImage' not in TRANSFORMS.module_dict,
    reason="LoadRGBDImage (the frame store's RGB-D images) is not on this branch yet")


def _config(tmp_path, root):
    path = tmp_path / 'small_hggd_demo.py'
    path.write_text(f"""
_base_ = ['{REPO}/configs/hggd_demo.py']
data_root = '{root}'
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root=data_root))
test_dataloader = dict(num_workers=0, dataset=dict(data_root=data_root))
test_evaluator = dict(data_root=data_root, nproc=1)
model = dict(test_centers=8, group_points=64)
train_cfg = dict(max_epochs=1)
""")
    return str(path)


def _run(*args, timeout=900):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout, env=ENV)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
def test_hggd_demo_trains_and_the_test_tool_prints_the_ap_table(tmp_path):
    root = str(tmp_path / 'graspnet')
    write_synthetic_dataset(root, scenes=1, frames=2, objects=4, points_per_object=60,
                            grid=(5, 3, 3), cameras=('realsense', ), seed=0, progress=False,
                            test_scenes=(100, ))
    config, work = _config(tmp_path, root), str(tmp_path / 'work')
    out = _run('tools/train.py', config, '--work-dir', work)
    assert 'HGGD grasps' in out.stdout + out.stderr  # the per-image grasps, built on first use
    with open(next(os.path.join(d, f) for d, _, fs in os.walk(work) for f in fs
                   if f == 'scalars.json')) as f:
        losses = [json.loads(line) for line in f if '"loss"' in line]
    assert losses and all(v == v and abs(v) < float('inf') for entry in losses
                          for k, v in entry.items() if k.startswith('loss'))
    figures = {}
    for name in ('epoch_0', 'epoch_1'):
        dump = str(tmp_path / f'dump_{name}')
        out = _run('tools/test.py', config, os.path.join(work, f'{name}.pth'), '--dump', dump,
                   '--work-dir', str(tmp_path / f'test_{name}'))
        table = out.stdout[out.stdout.rindex('| split |'):]
        for row in ('| seen | 2 |', '| camera | realsense |'):
            assert row in table, table
        with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
            figures[name] = json.load(f)['figures']
        assert 0.0 <= figures[name]['AP'] <= 100.0
