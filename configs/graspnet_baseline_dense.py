# GraspNet-baseline with dense label grids (the reference path); identical to the deferred run.
_base_ = ['./graspnet_baseline_deferred.py']

train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000),
    dict(type='SampleGraspLabels', point_fraction=0.25, min_points=300, min_object_points=50,
         visible_only=True, visible_distance=0.01, collision='zero_scores', tolerance=True,
         skip_objects=(18, ), grids='dense'),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.5235987755982988,
         apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'objectness')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
