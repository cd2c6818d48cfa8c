"""GSNet's demo recipe shrunk to a dataset of one's own labels (a small gripper grid), trained
for an epoch and tested with the tools, as a user would: shared by the tests that make such a
dataset (from the synthetic writer's meshes, or from a package's meshes with make_dataset.py)."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRIPPER = "dict(num_views=6, num_angles=3, num_depths=2)"


def run_tool(*args, env=None, timeout=900) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def train_and_test(root, tmp_path, env) -> tuple:
    """Write the config for ``root`` at ``tmp_path/mine.py``, train one epoch, test it; the
    config's path, the test tool's stdout and the evaluation JSON, its AP checked finite."""
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
    run_tool('tools/train.py', str(config), '--work-dir', str(work), env=env)
    out = run_tool('tools/test.py', str(config), str(work / 'epoch_1.pth'), '--work-dir',
                   str(tmp_path / 'test'), env=env)
    assert '| AP |' in out.stdout, out.stdout[-3000:]
    with open(tmp_path / 'test' / 'dump' / 'graspnet_realsense.json') as f:
        result = json.load(f)
    ap = result['figures']['AP']
    assert ap == ap and 0 <= ap <= 100  # finite
    return config, out.stdout, result
