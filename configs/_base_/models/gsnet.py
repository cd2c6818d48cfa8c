# GSNet (graspness_implementation): MinkUNet14D-style sparse U-Net (voxel 0.005 m, 3 -> 512),
# graspable mask + FPS to 1024 seeds, 300 views, cylinder crops r=0.05 m, 12 angles x 4 depths.
model = dict(
    type='GSNet',
    num_seeds=1024,
    graspness_threshold=0.1,
    num_views=300,
    num_angles=12,
    num_depths=4,
    seed=0,
    backbone=dict(type='SparseUNet14', in_channels=3, out_channels=512, voxel_size=0.005,
                  channels=(32, 64, 128, 256, 192, 192, 192, 192),
                  # the torch backend's convolution: 'auto' (chunked_im2col on CUDA, pairs on
                  # the CPU), 'chunked_im2col' or 'pairs' (mmgrasp/ops/numerics.py)
                  conv_algorithm='auto'),
    crop=dict(channels=(256, 256), radius=0.05, hmin=-0.02, hmax=0.04, nsample=16),
    assigner=dict(type='NearestLabelAssigner', num_views=300, all_view_widths=False,
                  with_tolerance=False, view_graspness=True, gsnet_score_norm=True,
                  distance_cutoff=False),
    loss=dict(type='GSNetLoss', objectness=1.0, graspness=10.0, view=100.0, score=15.0,
              width=10.0),
    # test.py of the reference: ModelFreeCollisionDetector(voxel 0.01).detect(approach_dist=0.05,
    # collision_thresh=0.01) on the whole masked cloud; collision_thresh=0 switches it off
    test_cfg=dict(collision_thresh=0.01, collision_voxel_size=0.01, approach_dist=0.05),
    # samplers and queries: 'auto' (Triton kernels on CUDA, torch references on the CPU),
    # 'torch' or 'triton' (mmgrasp/ops/numerics.py); hashed with the config
    point_ops='auto',
    data_preprocessor=dict(type='GraspDataPreprocessor'))
