# EconomicGrasp demo for a 2-core CPU on the synthetic dataset: the real label rules and data
# recipe, a smaller cloud and network. A few minutes; checkpoints every epoch.
#   python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10 \
#       --points-per-object 300 --cameras realsense
#   python tools/data/generate_graspness.py data/synthetic
#   python tools/train.py configs/economicgrasp_demo.py
#   python tools/test.py configs/economicgrasp_demo.py work_dirs/economicgrasp_demo/epoch_6.pth
_base_ = ['./economicgrasp_deferred.py']

data_root = 'data/synthetic'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=4000, outlier=0.02, voxel_size=0.005,
         with_graspness=True),
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(
    batch_size=2, num_workers=2,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
# As in gsnet_demo.py: objectness weighs 10 and Adam starts at 3e-3, so that the small cloud's
# graspable mask grows within the few steps of the demo.
model = dict(
    num_seeds=256,
    backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16), out_channels=64),
    crop=dict(channels=(64, 64), channels2=(64, 64)),
    head=dict(embed_channels=32),
    loss=dict(objectness=10.0))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
param_scheduler = [dict(type='CosineAnnealingLR', T_max=6, eta_min=0.0, by_epoch=True, begin=0,
                        end=6)]
train_cfg = dict(max_epochs=6)
# epoch_0.pth: the untrained weights (same seed), the baseline the trained AP is compared with
custom_hooks = [dict(type='ConfigHashHook'), dict(type='InitialCheckpointHook')]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread whatever the machine has (why: gsnet_demo.py).
env_cfg = dict(num_threads=1)
# The synthetic test scenes (100 seen, 130 similar, 160 novel), evaluated as GraspNet-1Billion.
test_dataloader = dict(dataset=dict(
    data_root=data_root, split='test',
    pipeline=[dict(type='LoadGraspScene', num_points=4000, outlier=0.02, voxel_size=0.005,
                   with_masked_cloud=True),
              dict(type='PackGraspInputs', keys=('points', ),
                   meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch',
                              'masked_cloud'))]))
test_evaluator = dict(data_root=data_root)
