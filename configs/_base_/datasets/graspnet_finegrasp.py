# GraspNet-1Billion, RealSense, FineGrasp's training data (RoboOrchardLab @241bbc6
# EconomicGraspNet1BDataset, config_finegrasp_minkunet.py build_dataset): EconomicGrasp's data
# (graspnet_economic.py: 20 000 points, the objects' workspace box ± 0.02 m, GSNet's graspness,
# the economic labels, only the x -> -x flip with p 0.5) plus the per-point normals of the
# sampled cloud by FineGrasp's rule (EstimateNormals: open3d's estimate_normals, radius 0.1 m,
# 30 neighbours; docs/user_guides/normals.md). The data preprocessor computes them on the batch
# (apply='device'; 'worker' computes them in the loader workers: the reference path, the same
# bits), then applies the flip, which mirrors the points but not the normals, as the
# reference's does. LoadGraspScene sets no voxel_size: the backbone voxelises the cloud itself,
# and the voxel coordinates PackGraspInputs would pack (inputs['coors']) are read by nothing.
_base_ = ['./graspnet_economic.py']

# orientation 'camera' (every normal faces the camera) | 'solver' (open3d's sign, what the
# published weights were fed: configs/finegrasp_published.py); scale 1 | 1/255
estimate_normals = dict(type='EstimateNormals', radius=0.1, max_nn=30, orientation='camera',
                        scale=1.0, apply='device')
train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, with_graspness=True),
    estimate_normals,
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='device',
         flip_normals=False),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]
test_pipeline = [
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, with_masked_cloud=True),
    estimate_normals,
    dict(type='PackGraspInputs', keys=('points', 'normals'),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
