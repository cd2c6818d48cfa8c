"""What the demo configs pin makes a CPU training repeat to the bit: env_cfg.num_threads sets
torch's thread count of tools/train.py (read back while training), and two trainings with the
same count end with the same losses and weights. (Another thread count changes the sums of
reductions and convolutions, hence the figures: docs/notes/benchmarks/demos.md measures that
spread; it is not asserted here.)"""
import os

import pytest

from _whole_training import (RECORDING, REPO, assert_finite_state, assert_same, final_state,
                             train)

ITERATIONS = 6  # 2 epochs x 3 batches of 2 frames

CONFIG = """
_base_ = ['{repo}/configs/gsnet_demo.py']
data_root = '{root}'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=800, with_graspness=True),
    dict(type='SampleGraspLabels', min_points=10, min_object_points=20),
    dict(type='RandomFlipRotateScene'),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(batch_size=2, num_workers=2,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5))
train_cfg = dict(max_epochs=2)
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=ITERATIONS))
""".replace('ITERATIONS', str(ITERATIONS)) + RECORDING + """
custom_hooks = [dict(type='ConfigHashHook'), dict(type='RecordLosses'),
                dict(type='RecordThreads')]
"""


@pytest.mark.slow
def test_the_same_thread_count_trains_to_the_bit(synthetic_root, tmp_path):
    config = str(tmp_path / 'pinned.py')
    with open(config, 'w') as f:
        f.write(CONFIG.format(repo=REPO, root=synthetic_root))
    runs = [str(tmp_path / name) for name in ('first', 'second')]
    losses = [train(config, run, '--cfg-options', 'env_cfg.num_threads=1',
                    iterations=ITERATIONS) for run in runs]
    for run in runs:
        with open(os.path.join(run, 'threads.txt')) as f:
            assert f.read() == '1'  # the option reached torch (its default: one per core)
    states = [final_state(run, ITERATIONS) for run in runs]
    assert_finite_state(states[0]['state_dict'], 'first')
    assert losses[0] == losses[1]  # every term of every iteration, exactly
    assert_same(states[0]['state_dict'], states[1]['state_dict'], 'state_dict')
    assert_same(states[0]['optimizer'], states[1]['optimizer'], 'optimizer')
