# Scale-Balanced-Grasp (GraspNet_MSCQ): light Point Transformer backbone (SA 2048/1024, each
# followed by a Point Transformer layer, k=16; 1024 seeds, 256 channels), ApproachNet, multi-scale
# cylinder crops (r=0.08 m at 0.25/0.5/0.75/1.0 r, per depth hmax=0.01..0.04, fused by a conv,
# plus sigmoid-gated seed features), OperationNet, ToleranceNet.
# ScaleBalancedAssigner: width-bin weight of each seed's best grasp (needs the scale statistic:
# add dict(type='ScaleStatisticHook', num_frames=3200) to custom_hooks) and robust-graspable
# targets (> 10 views with a label > 0.1).
# Loss: obj(robust graspable) + view + 0.2 * (score + angle + width + tolerance), masks x weight.
model = dict(
    type='ScaleBalancedGrasp',
    num_views=300,
    num_angles=12,
    num_depths=4,
    objectness_filter=True,  # pred_decode keeps the seeds predicted on an object
    backbone=dict(type='PointTransformerLightBackbone', in_channels=0, npoints=(2048, 1024),
                  radii=(0.04, 0.1), nsamples=(64, 32),
                  sa_mlps=((64, 64, 128), (128, 128, 256)), k=16, scale=1.0),
    approach=dict(type='ApproachNet'),
    crop=dict(type='MultiScaleCloudCrop', radius=0.08, radius_scales=(0.25, 0.5, 0.75, 1.0),
              hmin=-0.02, hmax=(0.01, 0.02, 0.03, 0.04), nsample=64, channels=(64, 128, 256)),
    operation=dict(type='OperationNet', hidden=128),
    tolerance=dict(type='ToleranceNet', hidden=128),
    assigner=dict(type='ScaleBalancedAssigner', num_views=300, min_views=10,
                  view_threshold=0.1),
    loss=dict(type='ScaleBalancedGraspLoss', objectness=1.0, view=1.0, grasp=0.2),
    # test.py of the reference: ModelFreeCollisionDetector(voxel 0.01).detect(approach_dist=0.05,
    # collision_thresh=0.01) on the whole masked cloud; collision_thresh=0 switches it off
    test_cfg=dict(collision_thresh=0.01, collision_voxel_size=0.01, approach_dist=0.05),
    # samplers and queries: 'auto' (Triton kernels on CUDA, torch references on the CPU),
    # 'torch' or 'triton' (mmgrasp/ops/numerics.py); hashed with the config
    point_ops='auto',
    data_preprocessor=dict(type='GraspDataPreprocessor'))
