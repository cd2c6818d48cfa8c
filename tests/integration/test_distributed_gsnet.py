"""The GSNet demo config (shrunk network) trains with 2 processes on gloo through
tools/dist_train.sh: each rank reads its own shard through its own readers — the two ranks'
samples are disjoint and together make each epoch — the samples of the two-process run are
those of a one-process run of the same config (same indices, same points and label rows), and
both ranks end with equal weights."""
import collections
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FRAMES, EPOCHS = 6, 2

CONFIG = """
_base_ = ['{repo}/configs/gsnet_demo.py']
custom_imports = dict(imports=['_rank_weights'], allow_failed_imports=False)
custom_hooks = [dict(type='ConfigHashHook'), dict(type='SaveRankWeightsHook'),
                dict(type='SaveRankSamplesHook')]
train_dataloader = dict(batch_size=1, num_workers=1, dataset=dict(
    data_root='{root}', pipeline=[
        dict(type='LoadGraspScene', num_points=800, with_graspness=True),
        dict(type='SampleGraspLabels', min_points=10, min_object_points=20),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
train_cfg = dict(max_epochs={epochs})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run(command, env) -> subprocess.CompletedProcess:
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def samples_by_epoch(path) -> dict:
    with open(path) as f:
        samples = json.load(f)
    by_epoch = collections.defaultdict(list)
    for epoch, index, digest in samples:
        by_epoch[epoch].append((index, digest))
    return dict(by_epoch)


@pytest.mark.slow
def test_two_gloo_processes_shard_the_epoch_and_end_with_equal_weights(synthetic_root,
                                                                       tmp_path):
    config = tmp_path / 'gsnet_ddp.py'
    config.write_text(CONFIG.format(repo=REPO, root=synthetic_root, epochs=EPOCHS))
    env = dict(os.environ, PORT=str(free_port()),
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get('PYTHONPATH', '')]))
    work_dir, single_dir = tmp_path / 'work', tmp_path / 'single'
    out = run(['bash', 'tools/dist_train.sh', str(config), '2', '--work-dir', str(work_dir)],
              env)
    run([sys.executable, 'tools/train.py', str(config), '--work-dir', str(single_dir)], env)

    ranks = [samples_by_epoch(work_dir / f'samples_rank{r}.json') for r in (0, 1)]
    single = samples_by_epoch(single_dir / 'samples_rank0.json')
    assert sorted(single) == sorted(ranks[0]) == sorted(ranks[1]) == list(range(EPOCHS))
    for epoch in range(EPOCHS):
        shards = [[index for index, _ in r[epoch]] for r in ranks]
        assert len(shards[0]) == len(shards[1]) == FRAMES // 2, shards
        assert not set(shards[0]) & set(shards[1]), f'epoch {epoch}: ranks share {shards}'
        assert sorted(shards[0] + shards[1]) == list(range(FRAMES)), shards
        # the same samples, point for point and label row for label row, as one process
        assert sorted(ranks[0][epoch] + ranks[1][epoch]) == sorted(single[epoch]), epoch
        # DefaultSampler's sharding: rank r takes every second index of the one-process order
        order = [index for index, _ in single[epoch]]
        assert shards == [order[0::2], order[1::2]], (epoch, shards, order)

    weights = [torch.load(work_dir / f'weights_rank{r}.pth', map_location='cpu') for r in (0, 1)]
    assert weights[0].keys() == weights[1].keys()
    for key in weights[0]:
        assert torch.isfinite(weights[0][key]).all(), key
        assert torch.equal(weights[0][key], weights[1][key]), key
    log = out.stdout + out.stderr
    assert f'Epoch(train) [{EPOCHS}][3/3]' in log  # 6 frames: 3 per rank per epoch
    checkpoint = torch.load(work_dir / f'epoch_{EPOCHS}.pth', map_location='cpu')
    assert checkpoint['meta']['iter'] == EPOCHS * FRAMES // 2
