# GSNet demo on synthetic GraspClutter6D scenes for a 2-core CPU (README "Training on
# GraspClutter6D"): gsnet_demo.py's smaller cloud and network on the GraspClutter6D layout, the
# D435's 13 annotations of 3 training scenes, evaluated on the test scene with the
# GraspClutter6D protocol.
#   python tools/data/make_synthetic.py data/synthetic_gc6d --layout graspclutter6d --scenes 3 \
#       --test-scenes 1 --frames 13 --objects 6 --points-per-object 300
#   python tools/data/generate_graspness.py data/synthetic_gc6d --camera realsense-d435
#   python tools/train.py configs/gsnet_gc6d_demo.py
#   python tools/test.py configs/gsnet_gc6d_demo.py work_dirs/gsnet_gc6d_demo/epoch_6.pth
_base_ = ['./gsnet_gc6d.py']

data_root = 'data/synthetic_gc6d'
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
# gsnet_demo.py's settings (objectness weight 10, Adam 3e-3): see the reasons there
model = dict(
    num_seeds=256,
    backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16), out_channels=64),
    crop=dict(channels=(64, 64)),
    loss=dict(objectness=10.0))
optim_wrapper = dict(optimizer=dict(lr=3e-3))
train_cfg = dict(max_epochs=6)
custom_hooks = [dict(type='ConfigHashHook'), dict(type='InitialCheckpointHook')]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread whatever the machine has (why: gsnet_demo.py).
env_cfg = dict(num_threads=1)
test_dataloader = dict(dataset=dict(
    data_root=data_root, split='test',
    pipeline=[dict(type='LoadGraspScene', num_points=4000, with_masked_cloud=True),
              dict(type='PackGraspInputs', keys=('points', ),
                   meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch',
                              'masked_cloud'))]))
test_evaluator = dict(data_root=data_root)
