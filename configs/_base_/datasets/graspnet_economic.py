# GraspNet-1Billion, RealSense, EconomicGrasp's training data (iSEE-Laboratory/EconomicGrasp
# @7361bb6 train.py / dataset/graspnet_dataset.py): 20 000 points, workspace box of the objects
# ± 0.02 m in the table frame (remove_outlier=True), GSNet's graspness labels, voxel 0.005, only
# the x -> -x flip with p 0.5 (no rotation), the economic labels of every instance of the scene
# (LoadEconomicLabels: derived from the label store on first use, or ahead with
# tools/data/build_economic_labels.py). The input features are all ones: the model makes them.
# `grids` = 'deferred' (the matched rows read in the model by EconomicAssigner) or 'dense'
# (the whole per-scene arrays in every sample, as the reference loads them; bit-identical).
# Frames come from the frame store (LoadGraspScene's default source='frames'); the flip stays in
# the worker (apply='worker', the default): the voxel coordinates and the economic labels' poses
# are made there from the flipped cloud and poses.
dataset_type = 'GraspNetDataset'
data_root = 'data/graspnet'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, voxel_size=0.005,
         with_graspness=True),
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0),
    dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness')),
]
train_dataloader = dict(
    batch_size=4,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='EpochAwareSampler', shuffle=True),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', camera='realsense',
                 seed=0, pipeline=train_pipeline))
test_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, voxel_size=0.005,
         with_masked_cloud=True),
    dict(type='PackGraspInputs', keys=('points', ),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud')),
]
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    sampler=dict(type='EpochAwareSampler', shuffle=False),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', camera='realsense',
                 seed=0, pipeline=test_pipeline))
test_cfg = dict(type='TestLoop')
test_evaluator = dict(type='GraspNetMetric', data_root=data_root, camera='realsense',
                      dump_dir='work_dirs/dump', nproc=2)
