# FineGrasp demo for a 2-core CPU on the synthetic dataset: the real label rules, data recipe
# (normals included) and schedule shape, a smaller cloud and network. A few minutes;
# checkpoints every epoch.
#   python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10 \
#       --points-per-object 300 --cameras realsense
#   python tools/data/generate_graspness.py data/synthetic
#   python tools/train.py configs/finegrasp_demo.py
#   python tools/test.py configs/finegrasp_demo.py work_dirs/finegrasp_demo/epoch_6.pth
_base_ = ['./finegrasp_deferred.py']

data_root = 'data/synthetic'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=4000, outlier=0.02, with_graspness=True),
    {{_base_.estimate_normals}},
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='device',
         flip_normals=False),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]
train_dataloader = dict(
    batch_size=2, num_workers=2,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
# As in economicgrasp_demo.py: objectness weighs 10 and Adam runs at 3e-3, so that the small
# cloud's graspable mask grows within the few steps of the demo; FineGrasp's schedule shape
# (one epoch of warm-up, then the cosine over all steps) over the demo's 6 epochs.
model = dict(
    num_seeds=256,
    backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16), stem_channels=16, out_channels=64),
    crop=dict(channels=(64, 64), channels2=(64, 64), fusion_heads=8, fusion_feedforward=256),
    head=dict(embed_channels=32),
    loss=dict(objectness=10.0))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
param_scheduler = [dict(type='WarmupCosineLR', warmup=1, min_scale=1e-5, by_epoch=True,
                        begin=0, end=6, convert_to_iter_based=True)]
train_cfg = dict(max_epochs=6)
# epoch_0.pth: the untrained weights (same seed), the baseline the trained AP is compared with
custom_hooks = [dict(type='ConfigHashHook'), dict(type='InitialCheckpointHook')]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread whatever the machine has (why: gsnet_demo.py).
env_cfg = dict(num_threads=1)
# The synthetic test scenes (100 seen, 130 similar, 160 novel), evaluated as GraspNet-1Billion.
test_dataloader = dict(dataset=dict(
    data_root=data_root, split='test',
    pipeline=[dict(type='LoadGraspScene', num_points=4000, outlier=0.02,
                   with_masked_cloud=True),
              {{_base_.estimate_normals}},
              dict(type='PackGraspInputs', keys=('points', 'normals'),
                   meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch',
                              'masked_cloud'))]))
test_evaluator = dict(data_root=data_root)
