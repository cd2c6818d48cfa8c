# GraspNet-1Billion, RealSense, GraspNet-baseline's training recipe (also Scale-Balanced-Grasp's):
# 20 000 points, visible label points only (within 1 cm of the object's sampled points), a
# quarter (at least 300) of them per object, object 18 never labelled, scene collisions written
# into mu and tolerance, flip + rotation augmentation. `grids` selects how label grids travel:
# 'deferred' (read in the model after seed selection) or 'dense' (the reference path); both give
# identical training. Frames come from the frame store (LoadGraspScene's default
# source='frames', built on first use) and the augmentation is drawn in the worker but applied to
# the batch by the data preprocessor (apply='device'), as is the visible-label test
# (SampleGraspLabels' visible_test, 'device' with deferred grids); source='files',
# apply='worker' and visible_test='worker' are the reference paths, bit-identical.
dataset_type = 'GraspNetDataset'
data_root = 'data/graspnet'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000),
    dict(type='SampleGraspLabels', point_fraction=0.25, min_points=300, min_object_points=50,
         visible_only=True, visible_distance=0.01, collision='zero_scores', tolerance=True,
         skip_objects=(18, ), grids='deferred'),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.5235987755982988,
         apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'objectness')),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='EpochAwareSampler', shuffle=True),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', camera='realsense',
                 seed=0, pipeline=train_pipeline))
# Inference on the test scenes; tools/test.py dumps the grasps in GraspNet's layout and
# evaluates them (GraspNetMetric). The whole masked cloud travels with each frame for the
# model's collision filter (model.test_cfg), as the reference test scripts use it.
test_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, with_masked_cloud=True),
    dict(type='PackGraspInputs', keys=('points', ),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud')),
]
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    sampler=dict(type='EpochAwareSampler', shuffle=False),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', camera='realsense',
                 seed=0, test_mode=True, pipeline=test_pipeline))
test_cfg = dict(type='TestLoop')
test_evaluator = dict(type='GraspNetMetric', data_root=data_root, camera='realsense',
                      dump_dir='work_dirs/dump', nproc=2)
