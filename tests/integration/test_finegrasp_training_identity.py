"""Whole FineGrasp trainings (demo config with its warm-up + cosine schedule and gradient clip,
shrunk network, normals and the flip in the data preprocessor, 2 loader workers, shuffling) through tools/train.py with
dense and with deferred economic labels: every loss finite, then every loss term of every
iteration and the final weights and optimizer state bit for bit equal."""
import glob
import os

import numpy as np
import pytest

from _whole_training import (RECORDING, REPO, assert_finite_state, assert_same, final_state,
                             train)

ITERATIONS = 12  # 4 epochs x 3 batches of 2 frames

CONFIG = """
_base_ = ['{repo}/configs/finegrasp_demo.py']
data_root = '{root}'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=800, outlier=0.02, with_graspness=True),
    dict(type='EstimateNormals', apply='device'),
    dict(type='LoadEconomicLabels', grids='{grids}', top_k={views}),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]
train_dataloader = dict(batch_size=2, num_workers=2, persistent_workers=True,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
model = dict(num_seeds=32, num_views={views},
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), stem_channels=8, out_channels=16),
             crop=dict(channels=(16, ), channels2=(16, ), fusion_heads=4,
                       fusion_feedforward=32),
             head=dict(embed_channels=8), assigner=dict(num_views={views}))
param_scheduler = [dict(type='WarmupCosineLR', warmup=1, by_epoch=True, begin=0, end=4,
                        convert_to_iter_based=True)]
train_cfg = dict(max_epochs=4)
default_hooks = dict(logger=dict(interval=3),
                     checkpoint=dict(by_epoch=False, interval={iterations}, max_keep_ckpts=-1))
""" + RECORDING


@pytest.mark.slow
def test_dense_and_deferred_labels_train_finegrasp_identically(synthetic_root, tmp_path):
    # the label grid's views, read from the dataset; 12 angles / 4 depths in the heads (the
    # assigner's unmatched defaults are classes of those heads)
    label_file = sorted(glob.glob(os.path.join(synthetic_root, 'grasp_label', '*.npz')))[0]
    with np.load(label_file) as label:
        views = label['scores'].shape[1]
    runs = {}
    for grids in ('dense', 'deferred'):
        config = str(tmp_path / f'finegrasp_{grids}.py')
        with open(config, 'w') as f:
            f.write(CONFIG.format(repo=REPO, root=synthetic_root, grids=grids, views=views,
                                  iterations=ITERATIONS))
        work_dir = str(tmp_path / grids)
        runs[grids] = (train(config, work_dir, iterations=ITERATIONS), work_dir)
    (dense_losses, dense_dir), (deferred_losses, deferred_dir) = runs['dense'], runs['deferred']
    # every term live somewhere: a training whose grasp losses stay 0 would compare nothing
    for term in ('loss_angle', 'loss_depth', 'loss_score', 'loss_width', 'loss_view'):
        assert any(r[term] > 0 for r in dense_losses), term
    assert deferred_losses == dense_losses  # every term of every iteration, exactly
    a, b = final_state(dense_dir, ITERATIONS), final_state(deferred_dir, ITERATIONS)
    assert_finite_state(a['state_dict'], 'dense')
    assert_finite_state(b['state_dict'], 'deferred')
    assert a['meta']['config_hash'] != b['meta']['config_hash']  # grids is part of the run
    assert_same(a['state_dict'], b['state_dict'], 'state_dict')
    assert_same(a['optimizer'], b['optimizer'], 'optimizer')
