# GraspNet-1Billion, RealSense, HGGD's image recipe (THU-VCLab/HGGD dataset/graspnet_dataset.py,
# train_graspnet.sh): whole 1280 x 720 RGB-D frames read from the image store as uint8 / uint16
# (LoadRGBDImage; source='files' decodes the PNGs, the same values bit for bit), the frame's
# per-image grasps from their derived asset of the label store (built on first use, or by
# tools/data/build_hggd_labels.py), 25 600 cloud pixels drawn in the worker. Resizing to
# 640 x 360, normalising, lifting the cloud and rendering the targets happen on the device
# (HGGDDataPreprocessor, in the model config). The reference trains without augmentation.
dataset_type = 'GraspNetDataset'
data_root = 'data/graspnet'
camera = 'realsense'
input_size = (640, 360)
num_points = 25600
train_pipeline = [
    dict(type='LoadRGBDImage', source='frames'),
    dict(type='LoadHGGDGrasps', input_size=input_size, max_grasps=5000, min_score=0.8),
    dict(type='SampleDepthPixels', num_points=num_points),
    dict(type='PackHGGDInputs'),
]
train_dataloader = dict(
    batch_size=4,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='EpochAwareSampler', shuffle=True),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', camera=camera,
                 seed=0, pipeline=train_pipeline))
# Inference on the test scenes; tools/test.py dumps the grasps in GraspNet's layout and
# evaluates them (GraspNetMetric). The model filters collisions on the sampled cloud and
# applies grasp NMS (model.test_cfg), as test_graspnet.py does; no labels are read.
test_pipeline = [
    dict(type='LoadRGBDImage', source='frames'),
    dict(type='SampleDepthPixels', num_points=num_points),
    dict(type='PackHGGDInputs'),
]
test_dataloader = dict(
    batch_size=1,
    num_workers=2,
    sampler=dict(type='EpochAwareSampler', shuffle=False),
    collate_fn=dict(type='pseudo_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', camera=camera,
                 seed=0, test_mode=True, pipeline=test_pipeline))
test_cfg = dict(type='TestLoop')
test_evaluator = dict(type='GraspNetMetric', data_root=data_root, camera=camera,
                      dump_dir='work_dirs/dump', nproc=2)
