"""The GSNet demo config (shrunk network) trains with 2 processes on gloo through
tools/dist_train.sh: each rank reads its own shard through its own readers, the two shards
together are the epoch of one process, and both ranks end with equal weights."""
import os
import socket
import subprocess

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CONFIG = """
_base_ = ['{repo}/configs/gsnet_demo.py']
custom_imports = dict(imports=['_rank_weights'], allow_failed_imports=False)
custom_hooks = [dict(type='ConfigHashHook'), dict(type='SaveRankWeightsHook')]
train_dataloader = dict(batch_size=1, num_workers=1, dataset=dict(
    data_root='{root}', pipeline=[
        dict(type='LoadGraspScene', num_points=800, with_graspness=True),
        dict(type='SampleGraspLabels', min_points=10, min_object_points=20),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
train_cfg = dict(max_epochs=2)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_processes_end_with_equal_weights(synthetic_root, tmp_path):
    config = tmp_path / 'gsnet_ddp.py'
    config.write_text(CONFIG.format(repo=REPO, root=synthetic_root))
    work_dir = tmp_path / 'work'
    env = dict(os.environ, PORT=str(free_port()),
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get('PYTHONPATH', '')]))
    out = subprocess.run(['bash', 'tools/dist_train.sh', str(config), '2', '--work-dir',
                          str(work_dir)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ranks = [torch.load(work_dir / f'weights_rank{r}.pth', map_location='cpu') for r in (0, 1)]
    assert ranks[0].keys() == ranks[1].keys()
    for key in ranks[0]:
        assert torch.equal(ranks[0][key], ranks[1][key]), key
    log = out.stdout + out.stderr
    assert 'Epoch(train) [2][3/3]' in log  # 6 frames: 3 per rank per epoch
    checkpoint = torch.load(work_dir / 'epoch_2.pth', map_location='cpu')
    assert checkpoint['meta']['iter'] == 6
