"""Whole GSNet trainings (demo config, shrunk network, >= 100 iterations, 2 loader workers,
shuffling and augmentation on) through tools/train.py, three ways — dense; deferred; first
half dense, then resumed mid-epoch under deferred with the config mismatch allowed — keep
every loss finite, then end with bit-identical weights and optimizer state."""
import os

import pytest
import torch

from _whole_training import (RECORDING, REPO, assert_finite_state, assert_same, final_state,
                             run_train, train)

ITERATIONS = 102  # 34 epochs x 3 batches of 2 frames; the checkpoint at 50 is mid-epoch

CONFIG = """
_base_ = ['{repo}/configs/gsnet_demo.py']
data_root = '{root}'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=800, with_graspness=True),
    dict(type='SampleGraspLabels', min_points=10, min_object_points=20, grids='{grids}'),
    dict(type='RandomFlipRotateScene'),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(batch_size=2, num_workers=2, persistent_workers=True,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
train_cfg = dict(max_epochs=34)
default_hooks = dict(logger=dict(interval=17),
                     checkpoint=dict(by_epoch=False, interval=50, max_keep_ckpts=-1))
""" + RECORDING


@pytest.mark.slow
def test_dense_deferred_and_switched_resume_train_identically(synthetic_root, tmp_path):
    configs = {}
    for grids in ('dense', 'deferred'):
        configs[grids] = str(tmp_path / f'gsnet_{grids}.py')
        with open(configs[grids], 'w') as f:
            f.write(CONFIG.format(repo=REPO, root=synthetic_root, grids=grids))
    dense, deferred, switched = (str(tmp_path / name) for name in ('dense', 'deferred', 'switched'))
    dense_losses = train(configs['dense'], dense, iterations=ITERATIONS)
    deferred_losses = train(configs['deferred'], deferred, iterations=ITERATIONS)
    refused = run_train(configs['deferred'], switched, '--resume',
                        os.path.join(dense, 'iter_50.pth'))
    assert refused.returncode != 0 and 'allow_config_mismatch' in refused.stderr + refused.stdout
    switched_losses = train(configs['deferred'], switched, '--resume',
                            os.path.join(dense, 'iter_50.pth'), '--cfg-options',
                            'allow_config_mismatch=True', iterations=ITERATIONS)
    assert [r['iter'] for r in switched_losses] == list(range(51, ITERATIONS + 1))
    assert deferred_losses == dense_losses  # every term of every iteration, exactly
    assert switched_losses == dense_losses[50:]
    a, b, c = (final_state(d, ITERATIONS) for d in (dense, deferred, switched))
    assert_finite_state(a['state_dict'], 'dense')
    assert a['meta']['config_hash'] != b['meta']['config_hash']  # grids is part of the run
    for other in (b, c):
        assert_same(a['state_dict'], other['state_dict'], 'state_dict')
        assert_same(a['optimizer'], other['optimizer'], 'optimizer')
    initial = final_state(dense, 50)['state_dict']
    assert any(not torch.equal(initial[k], a['state_dict'][k]) for k in initial)
