# HGGD demo for a 2-core CPU on the synthetic dataset of the README quick start (the same
# 1280 x 720 RealSense frames as gsnet_demo.py): the reference networks, input size and targets
# (AnchorGraspNet needs 640 x 360 for the frames' 16:9); a cloud of 4 096 points fused from 3
# xyz-map neighbours (the reference: 25 600 and 8; the CPU's kNN sorts every distance for k > 3),
# 32 centres of 256 points a frame in training, batches of 2 without accumulation.
#   python tools/data/make_synthetic.py data/synthetic --scenes 4 --frames 4 --objects 10 \
#       --points-per-object 300 --cameras realsense
#   python tools/train.py configs/hggd_demo.py
#   python tools/test.py configs/hggd_demo.py work_dirs/hggd_demo/epoch_6.pth
_base_ = ['./hggd_realsense.py']

data_root = 'data/synthetic'
num_points = 4096
train_pipeline = [
    dict(type='LoadRGBDImage', source='frames'),
    dict(type='LoadHGGDGrasps', input_size=(640, 360), max_grasps=5000, min_score=0.8),
    dict(type='SampleDepthPixels', num_points=num_points),
    dict(type='PackHGGDInputs'),
]
test_pipeline = [
    dict(type='LoadRGBDImage', source='frames'),
    dict(type='SampleDepthPixels', num_points=num_points),
    dict(type='PackHGGDInputs'),
]
train_dataloader = dict(batch_size=2, num_workers=2,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
test_dataloader = dict(dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_evaluator = dict(data_root=data_root)
model = dict(train_centers=32, test_centers=48, group_points=256, min_points=16, knn=3)
optim_wrapper = dict(accumulative_counts=1)
# the last checkpoint scores AP 5.06 on the synthetic test scenes, the untrained start 0.46 (one
# run; docs/notes/benchmarks/demos.md "HGGD demo")
param_scheduler = [dict(type='StepLR', step_size=4, gamma=0.1, by_epoch=True)]
train_cfg = dict(max_epochs=6)
# epoch_0.pth: the untrained weights (same seed), the baseline the trained AP is compared with
custom_hooks = [dict(type='HGGDAnchorShiftHook', shift_epochs=5, threshold=1e6),
                dict(type='BNMomentumHook', module='anchor_net', initial=0.5, decay=0.5, step=2,
                     minimum=0.001),
                dict(type='ConfigHashHook'), dict(type='InitialCheckpointHook')]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread, as every demo (gsnet_demo.py says why). The figures above were measured before
# this pin, with torch's default thread count; at 1 thread they may differ in the last digits.
env_cfg = dict(num_threads=1)
