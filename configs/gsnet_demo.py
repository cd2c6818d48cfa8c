# GSNet demo for a 2-core CPU on the synthetic dataset (README quick start): the real label
# grid and data recipe, a smaller cloud and network. A few minutes; checkpoints every epoch.
#   python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10 \
#       --points-per-object 300 --cameras realsense
#   python tools/data/generate_graspness.py data/synthetic
#   python tools/train.py configs/gsnet_demo.py
_base_ = ['./gsnet_deferred.py']

data_root = 'data/synthetic'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=4000, with_graspness=True),
    dict(type='SampleGraspLabels', point_fraction=0.25, min_points=300, min_object_points=50,
         collision='zero_scores', grids='deferred'),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.5235987755982988,
         apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(
    batch_size=2, num_workers=2,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
# Objectness weighs 10 (GSNet: 1) and Adam starts at 3e-3 (GSNet: 1e-3): with GSNet's values this
# small cloud (30 % object points) keeps its objectness near the prior for the 48 steps, the
# graspable mask keeps a few points, every seed lands on them and the demo scores AP 0.00, as
# untrained weights do; with these the last checkpoint scores AP 10.88 on the test scenes (three
# runs, the same to the digit; 18 epochs: 19.71, the labels' own grasps: 100.00;
# docs/notes/benchmarks/demos.md "GSNet demo: spread, longer runs, label ceiling").
model = dict(
    num_seeds=256,
    backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16), out_channels=64),
    crop=dict(channels=(64, 64)),
    loss=dict(objectness=10.0))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
train_cfg = dict(max_epochs=6)
# epoch_0.pth: the untrained weights (same seed), the baseline the trained AP is compared with
custom_hooks = [dict(type='ConfigHashHook'), dict(type='InitialCheckpointHook')]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread whatever the machine has: on the CPU the sums of a reduction or a convolution
# follow the thread count, so the figures repeat to the bit only with the same thread count
# (and torch build and kind of CPU). One thread gave the same figures on two kinds of EPYC where
# two threads did not, and is the fastest on a loaded machine (docs/notes/benchmarks/demos.md,
# "Demo figures across thread counts").
env_cfg = dict(num_threads=1)
# The synthetic test scenes (100 seen, 130 similar, 160 novel), evaluated as GraspNet-1Billion.
test_dataloader = dict(dataset=dict(
    data_root=data_root, split='test',
    pipeline=[dict(type='LoadGraspScene', num_points=4000, with_masked_cloud=True),
              dict(type='PackGraspInputs', keys=('points', ),
                   meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch',
                              'masked_cloud'))]))
test_evaluator = dict(data_root=data_root)
