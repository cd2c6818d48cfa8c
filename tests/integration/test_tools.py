"""The command-line tools on the synthetic dataset: tools/test.py dumps well-formed grasps from
a demo checkpoint of each recipe, and the loader benchmark writes every figure."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHRINK = {
    'gsnet_demo.py': """
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
""",
    'graspnet_baseline_demo.py': """
# objectness_filter off: a 1-epoch model may place no seed on an object, and every seed's row
# is checked here
model = dict(num_views=5, num_angles=3, num_depths=3, objectness_filter=False,
             backbone=dict(npoints=(256, 128, 64, 32), nsamples=(16, 8, 8, 8), scale=0.125),
             crop=dict(nsample=8, channels=(8, 8, 16), hmax=(0.01, 0.02, 0.03)),
             assigner=dict(num_views=5))
""",
}


def _config(tmp_path, name, root, num_points, grids='deferred'):
    path = tmp_path / f'small_{name}'
    with_graspness = 'gsnet' in name
    keys = "('points', 'objectness', 'graspness')" if with_graspness else "('points', 'objectness')"
    label_options = ("" if with_graspness else
                     "visible_only=True, tolerance=True, skip_objects=(18, ), ")
    path.write_text(f"""
_base_ = ['{REPO}/configs/{name}']
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{root}', pipeline=[
        dict(type='LoadGraspScene', num_points={num_points}, with_graspness={with_graspness}),
        dict(type='SampleGraspLabels', min_object_points=20, {label_options}grids='{grids}'),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys={keys})]))
test_dataloader = dict(num_workers=0, dataset=dict(
    data_root='{root}', split='train', pipeline=[
        dict(type='LoadGraspScene', num_points={num_points}),
        dict(type='PackGraspInputs', keys=('points', ))]))
train_cfg = dict(max_epochs=1)
{SHRINK[name]}""")
    return str(path)


def _run(*args, timeout=600):
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(SHRINK))
def test_test_tool_dumps_well_formed_grasps(synthetic_root, tmp_path, name):
    config = _config(tmp_path, name, synthetic_root, 1200)
    work_dir, dump = str(tmp_path / 'work'), str(tmp_path / 'dump')
    _run('tools/train.py', config, '--work-dir', work_dir)
    out = _run('tools/test.py', config, os.path.join(work_dir, 'epoch_1.pth'), '--dump', dump,
               '--work-dir', str(tmp_path / 'test'), '--dump-only', '--collision-thresh', '0')
    assert 'wrote 6 frames' in out.stdout
    files = sorted(os.path.relpath(os.path.join(d, f), dump)
                   for d, _, fs in os.walk(dump) for f in fs)
    assert files == [f'scene_{s:04d}/realsense/{f:04d}.npy' for s in (0, 1) for f in range(3)]
    for file in files:
        grasps = np.load(os.path.join(dump, file))
        assert grasps.dtype == np.float32 and grasps.ndim == 2 and grasps.shape[1] == 17
        assert len(grasps) > 0 and np.isfinite(grasps).all()
        rotations = grasps[:, 4:13].reshape(-1, 3, 3).astype(np.float64)
        np.testing.assert_allclose(rotations @ rotations.transpose(0, 2, 1),
                                   np.broadcast_to(np.eye(3), rotations.shape), atol=1e-5)
        np.testing.assert_allclose(np.linalg.det(rotations), 1, atol=1e-5)
        assert ((grasps[:, 1] >= 0) & (grasps[:, 1] <= 0.1)).all()
        assert (grasps[:, 2] == np.float32(0.02)).all() and (grasps[:, 16] == -1).all()


@pytest.mark.slow
def test_read_benchmark_measures_label_matching(synthetic_root, tmp_path):
    """benchmark_deferred_read --assigner: the three paths of each recipe agree (it checks) and
    the matched cells copy fewer bytes out of the maps than whole rows."""
    report = str(tmp_path / 'read.json')
    out = _run('tools/analysis/benchmark_deferred_read.py', '--root', synthetic_root, '--rows',
               '50', '--repeats', '1', '--assigner', '--seeds', '32', '--json', report)
    assert '| gsnet | matched cells |' in out.stdout and '| sbg | whole rows |' in out.stdout
    with open(report) as f:
        assigner = json.load(f)['assigner']
    for recipe in ('gsnet', 'bl', 'sbg'):
        paths = assigner[recipe]
        assert paths['dense']['bytes'] == 0
        assert 0 < paths['matched cells']['bytes'] < paths['whole rows']['bytes']


@pytest.mark.slow
def test_loader_benchmark_writes_every_figure(synthetic_root, tmp_path):
    config = _config(tmp_path, 'gsnet_demo.py', synthetic_root, 1000)
    report = str(tmp_path / 'bench.json')
    out = _run('tools/analysis/benchmark_loader.py', config, '--iterations', '2', '--warmup',
               '1', '--repeats', '1', '--workers', '0', '--json', report)
    assert '| loader frames/s |' in out.stdout and '|   assigner (ms) |' in out.stdout
    with open(report) as f:
        figures = json.load(f)
    keys = {'loader_fps', 'worker_cpu_ms', 'batch_mib', 'first_batch_s', 'to_device_ms',
            'forward_ms', 'backbone_ms', 'seed_selection_ms', 'view_ms', 'assigner_ms',
            'grouper_ms', 'head_ms', 'losses_ms', 'backward_ms', 'optimizer_ms', 'iteration_ms',
            'wait_ms', 'map_copy_mib'}
    for storage in ('dense', 'deferred'):
        (run,) = figures['results'][storage]
        assert keys <= set(run) and all(v >= 0 for v in run.values())
    assert figures['results']['dense'][0]['map_copy_mib'] == 0
    assert figures['results']['deferred'][0]['map_copy_mib'] > 0
    assert figures['results']['dense'][0]['batch_mib'] > figures['results']['deferred'][0][
        'batch_mib']
    assert set(figures['ratios']) == {'bytes_dense_over_deferred',
                                      'loader_fps_deferred_over_dense',
                                      'first_batch_deferred_over_dense',
                                      'iteration_deferred_over_dense'}
