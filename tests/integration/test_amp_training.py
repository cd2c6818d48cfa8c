"""``tools/train.py CONFIG --amp`` trains each demo recipe: bfloat16 autocast on the CPU
(CPUAmpOptimWrapper), float16 with a dynamic loss scale on CUDA (AmpOptimWrapper). Losses stay
finite, every logged iteration, and the weights move."""
import json
import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHRINK = {
    'gsnet_demo.py': """
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
""",
    'graspnet_baseline_demo.py': """
model = dict(num_views=5, num_angles=3, num_depths=3,
             backbone=dict(npoints=(256, 128, 64, 32), nsamples=(16, 8, 8, 8), scale=0.125),
             crop=dict(nsample=8, channels=(8, 8, 16), hmax=(0.01, 0.02, 0.03)),
             operation=dict(hidden=16), tolerance=dict(hidden=16), assigner=dict(num_views=5))
""",
    'scale_balanced_demo.py': """
model = dict(num_views=5, num_angles=3, num_depths=3,
             backbone=dict(npoints=(128, 64), nsamples=(16, 8), scale=0.125),
             crop=dict(nsample=8, channels=(8, 16, 32), hmax=(0.01, 0.02, 0.03)),
             operation=dict(hidden=16), tolerance=dict(hidden=16), assigner=dict(num_views=5))
custom_hooks = [dict(type='ConfigHashHook'),
                dict(type='ScaleStatisticHook', num_frames=6, min_count=1)]
""",
}


def amp_config(tmp_path, name: str, root: str, num_points: int = 1200,
               grids: str = 'deferred') -> str:
    """The demo config ``name`` shrunk for the synthetic test data: 1 epoch of 3 iterations,
    a checkpoint and a log line every iteration (also used by test_cuda_identity)."""
    gsnet = 'gsnet' in name
    keys = "('points', 'objectness', 'graspness')" if gsnet else "('points', 'objectness')"
    label_options = '' if gsnet else 'visible_only=True, tolerance=True, '
    path = tmp_path / f'amp_{grids}_{name}'
    path.write_text(f"""
_base_ = ['{REPO}/configs/{name}']
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{root}', pipeline=[
        dict(type='LoadGraspScene', num_points={num_points}, with_graspness={gsnet}),
        dict(type='SampleGraspLabels', min_points=10, min_object_points=20, {label_options}
             grids='{grids}'),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys={keys})]))
train_cfg = dict(max_epochs=1)
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(by_epoch=False, interval=1, max_keep_ckpts=-1))
{SHRINK[name]}""")
    return str(path)


def logged_losses(work_dir: str) -> list:
    """Every 'loss*' value of every logged iteration (vis_data/scalars.json)."""
    (scalars,) = [os.path.join(d, f) for d, _, fs in os.walk(work_dir) for f in fs
                  if f == 'scalars.json']
    with open(scalars) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(row['step'], key, value) for row in rows for key, value in row.items()
            if key.startswith('loss')]


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(SHRINK))
def test_amp_training_is_finite_and_updates(amp_runs, name):
    out, work_dir = amp_runs(name)  # trained once a session (tests/integration/conftest.py)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    wrapper = 'AmpOptimWrapper' if torch.cuda.is_available() else 'CPUAmpOptimWrapper'
    assert f"type='{wrapper}'" in out.stdout + out.stderr
    losses = logged_losses(work_dir)
    assert sorted({step for step, _, _ in losses}) == [1, 2, 3]
    assert all(torch.isfinite(torch.tensor(value)) for _, _, value in losses), losses
    first, last = (torch.load(os.path.join(work_dir, f'iter_{i}.pth'), map_location='cpu',
                              weights_only=False)['state_dict'] for i in (1, 3))
    floating = [k for k in first if first[k].is_floating_point()]
    assert all(torch.isfinite(last[k]).all() for k in floating)
    assert all(last[k].dtype == torch.float32 for k in floating)  # master weights stay float32
    changed = [k for k in floating if not torch.equal(first[k], last[k])]
    weights = [k for k in floating if k.endswith('weight')]
    assert set(weights) <= set(changed), sorted(set(weights) - set(changed))
