# GraspNet-1Billion, RealSense, FineGrasp's training data (RoboOrchardLab @241bbc6
# EconomicGraspNet1BDataset, config_finegrasp_minkunet.py build_dataset): EconomicGrasp's data
# (graspnet_economic.py: 20 000 points, the objects' workspace box ± 0.02 m, voxel 0.005,
# GSNet's graspness, the economic labels, only the x -> -x flip with p 0.5) plus the per-point
# normals of the sampled cloud (LoadGraspScene(with_normals=True), one rule for training and
# inference: mmgrasp/datasets/point_normals.py). The flip mirrors the points but not the normals,
# as the reference's does; it runs in the workers (apply='worker'), where the normals are.
_base_ = ['./graspnet_economic.py']

train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, voxel_size=0.005,
         with_graspness=True, with_normals=True),
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='worker',
         flip_normals=False),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]
test_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, voxel_size=0.005,
         with_masked_cloud=True, with_normals=True),
    dict(type='PackGraspInputs', keys=('points', 'normals'),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
