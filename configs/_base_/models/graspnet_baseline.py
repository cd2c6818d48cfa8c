# GraspNet-baseline (graspnet-baseline): PointNet++ (SA 2048/1024/512/256, FP back to 1024 seeds,
# 256 channels), ApproachNet (objectness + 300 view scores, top view = argmax), one cylinder crop
# per depth (r=0.05 m, hmin=-0.02, hmax=0.01..0.04, 64 points, MLP 3-64-128-256), OperationNet
# (score, angle class, width per 12 angles x 4 depths), ToleranceNet.
# Loss: obj + view + 0.2 * (score + angle + width + tolerance).
model = dict(
    type='GraspNetBaseline',
    num_views=300,
    num_angles=12,
    num_depths=4,
    objectness_filter=True,  # pred_decode keeps the seeds predicted on an object
    backbone=dict(type='PointNet2Backbone', in_channels=0,
                  npoints=(2048, 1024, 512, 256), radii=(0.04, 0.1, 0.2, 0.3),
                  nsamples=(64, 32, 16, 16),
                  sa_mlps=((64, 64, 128), (128, 128, 256), (128, 128, 256), (128, 128, 256)),
                  fp_mlps=((256, 256), (256, 256)), scale=1.0),
    approach=dict(type='ApproachNet'),
    crop=dict(type='DepthCloudCrop', radius=0.05, hmin=-0.02, hmax=(0.01, 0.02, 0.03, 0.04),
              nsample=64, channels=(64, 128, 256)),
    operation=dict(type='OperationNet', hidden=128),
    tolerance=dict(type='ToleranceNet', hidden=128),
    assigner=dict(type='NearestLabelAssigner', num_views=300, all_view_widths=True,
                  with_tolerance=True, view_graspness=False, gsnet_score_norm=False,
                  distance_cutoff=False),
    loss=dict(type='GraspNetBaselineLoss', objectness=1.0, view=1.0, grasp=0.2),
    # test.py of the reference: ModelFreeCollisionDetector(voxel 0.01).detect(approach_dist=0.05,
    # collision_thresh=0.01) on the whole masked cloud; collision_thresh=0 switches it off
    test_cfg=dict(collision_thresh=0.01, collision_voxel_size=0.01, approach_dist=0.05),
    # samplers and queries: 'auto' (Triton kernels on CUDA, torch references on the CPU),
    # 'torch' or 'triton' (mmgrasp/ops/numerics.py); hashed with the config
    point_ops='auto',
    data_preprocessor=dict(type='GraspDataPreprocessor'))
