# The same training with dense label grids: the reference path. Bit-identical to
# gsnet_deferred.py (same samples, losses, gradients and weights); only slower and heavier.
_base_ = ['./gsnet_deferred.py']

train_pipeline = [
    dict(type='LoadGraspScene', num_points=15000, with_graspness=True),
    dict(type='SampleGraspLabels', point_fraction=0.25, min_points=300, min_object_points=50,
         collision='zero_scores', grids='dense'),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.5235987755982988,
         apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
