# The same training with the whole per-scene economic arrays in every sample (what the reference
# loads): the reference path. Bit-identical to finegrasp_deferred.py (same samples, losses,
# gradients and weights: tests/integration/test_finegrasp_training_identity.py).
_base_ = ['./finegrasp_deferred.py']

train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, with_graspness=True),
    {{_base_.estimate_normals}},
    dict(type='LoadEconomicLabels', grids='dense', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='device',
         flip_normals=False),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
