# EconomicGrasp (iSEE-Laboratory/EconomicGrasp @7361bb6): GSNet's MinkUNet14D-style sparse U-Net
# (voxel 0.005 m, 3 -> 512; the reference's TDUnet), graspable mask + FPS to 1024 seeds, 300
# views, cylinder crops r=0.05 m with attention, angle 13 / depth 5 / score 6 classes + width.
model = dict(
    type='EconomicGrasp',
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
    crop=dict(channels=(256, 256), channels2=(256, 256), attention_dropout=0.05, radius=0.05,
              hmin=-0.02, hmax=0.04, nsample=16),
    head=dict(embed_channels=64, attention_dropout=0.05),
    assigner=dict(type='EconomicAssigner', num_views=300),
    loss=dict(type='EconomicGraspLoss', objectness=1.0, graspness=10.0, view=100.0, angle=1.0,
              depth=1.0, score=1.0, width=10.0),
    # test.py of the reference: collision_thresh 0 by default (its README's runs pass 0.01);
    # the project's recipes filter with 0.01 on the whole masked cloud
    test_cfg=dict(collision_thresh=0.01, collision_voxel_size=0.01, approach_dist=0.05),
    # samplers and queries: 'auto' (Triton kernels on CUDA, torch references on the CPU),
    # 'torch' or 'triton' (mmgrasp/ops/numerics.py); hashed with the config
    point_ops='auto',
    data_preprocessor=dict(type='GraspDataPreprocessor'))
