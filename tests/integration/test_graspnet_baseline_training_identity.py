"""Whole GraspNet-baseline and Scale-Balanced-Grasp trainings (demo configs, shrunk networks,
the synthetic 5 x 3 x 3 grid, 2 loader workers, shuffling and augmentation on) through
tools/train.py, dense and deferred: every loss of every iteration is finite, then the two
storages give the same losses, bit-identical weights and optimizer state."""
import pytest
import torch

from _whole_training import (RECORDING, REPO, assert_finite_state, assert_same, final_state,
                             train)

EPOCHS = 4
ITERATIONS = 3 * EPOCHS  # 6 frames in batches of 2
HEADS = """
model = dict(num_views=5, num_angles=3, num_depths=3,
             crop=dict(nsample=16, channels=(16, 32, 64), hmax=(0.01, 0.02, 0.03)),
             operation=dict(hidden=32),
             tolerance=dict(hidden=32), {backbone})
"""
RECIPES = dict(
    BL=dict(demo='graspnet_baseline_demo.py', label_options="visible_only=True",
            backbone="backbone=dict(npoints=(256, 128, 64, 32), nsamples=(32, 16, 16, 16), "
                     "scale=0.25), assigner=dict(num_views=5)",
            hooks=''),
    SBG=dict(demo='scale_balanced_demo.py', label_options="visible_only=False",
             backbone="backbone=dict(npoints=(256, 128), nsamples=(32, 16), k=8, scale=0.25), "
                      "assigner=dict(num_views=5, min_views=1)",
             hooks="custom_hooks = custom_hooks + [dict(type='ScaleStatisticHook', "
                   "num_frames=6, min_count=1)]"))
CONFIG = """
_base_ = ['{repo}/configs/{demo}']
data_root = '{root}'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=1500),
    dict(type='SampleGraspLabels', min_points=10, min_object_points=20, tolerance=True,
         {label_options}, grids='{grids}'),
    dict(type='RandomFlipRotateScene'),
    dict(type='PackGraspInputs', keys=('points', 'objectness')),
]
train_dataloader = dict(batch_size=2, num_workers=2, persistent_workers=True,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
train_cfg = dict(max_epochs={epochs})
default_hooks = dict(logger=dict(interval=3),
                     checkpoint=dict(by_epoch=False, interval={half}, max_keep_ckpts=-1))
""" + HEADS + RECORDING + "{hooks}\n"


@pytest.mark.slow
@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_dense_and_deferred_train_identically(synthetic_root, tmp_path, recipe):
    options = RECIPES[recipe]
    losses, states = {}, {}
    for grids in ('dense', 'deferred'):
        config = tmp_path / f'{recipe}_{grids}.py'
        config.write_text(CONFIG.format(
            repo=REPO, root=synthetic_root, grids=grids, epochs=EPOCHS, half=ITERATIONS // 2,
            demo=options['demo'], label_options=options['label_options'],
            backbone=options['backbone'], hooks=options['hooks']))
        work_dir = str(tmp_path / grids)
        losses[grids] = train(str(config), work_dir, iterations=ITERATIONS)
        states[grids] = final_state(work_dir, ITERATIONS)
    assert_finite_state(states['dense']['state_dict'], f'{recipe} dense')
    terms = set(losses['dense'][0]) - {'iter', 'loss'}
    assert terms == {'loss_objectness', 'loss_view', 'loss_score', 'loss_angle', 'loss_width',
                     'loss_tolerance'}
    # the training is not trivial: every term is live somewhere, and the weights move
    assert all(any(r[t] > 0 for r in losses['dense']) for t in terms), losses['dense']
    assert losses['deferred'] == losses['dense']  # every term of every iteration, exactly
    a, b = states['dense'], states['deferred']
    assert a['meta']['config_hash'] != b['meta']['config_hash']  # grids is part of the run
    assert_same(a['state_dict'], b['state_dict'], 'state_dict')
    assert_same(a['optimizer'], b['optimizer'], 'optimizer')
    halfway = final_state(str(tmp_path / 'dense'), ITERATIONS // 2)['state_dict']
    assert any(not torch.equal(halfway[k], v) for k, v in a['state_dict'].items())
