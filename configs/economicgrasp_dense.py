# The same training with the whole per-scene economic arrays in every sample (what the reference
# loads): the reference path. Bit-identical to economicgrasp_deferred.py (same samples, losses,
# gradients and weights).
_base_ = ['./economicgrasp_deferred.py']

train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, voxel_size=0.005,
         with_graspness=True),
    dict(type='LoadEconomicLabels', grids='dense', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
