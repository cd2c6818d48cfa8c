# FineGrasp (HorizonRobotics/RoboOrchardLab @241bbc6, projects/finegrasp_graspnet1b/configs/
# config_finegrasp_minkunet.py): sparse U-Net on xyz + normal (6 channels, voxel 0.005 m) ->
# 512, graspable mask (objectness & graspness > 0.1) + FPS to 1024 seeds, 300 views (hidden
# features added back), four cylinder groups r = 0.07 x (0.25, 0.5, 0.75, 1.0) among the seeds
# (16 samples, hmin -0.02, hmax 0.04; MLP, one-head attention, MLP each) fused by a 2-layer
# transformer encoder (d 256, 8 heads, ff 1024) with softmax weights, then EconomicGrasp's grasp
# head: angle 13 / depth 5 / score 6 classes + width. Trained on EconomicGrasp's labels with
# EconomicGrasp's loss (the reference's seven loss classes are the same terms and weights).
model = dict(
    type='FineGrasp',
    use_normals=True,
    num_seeds=1024,
    graspness_threshold=0.1,
    num_views=300,
    num_angles=12,
    num_depths=4,
    seed=0,
    # the reference's MinkUNet (stem k5 -> 32, planes 32, 64, 128, 256, 192, 192, 192, 192, one
    # BasicBlock a stage, 1x1 conv with bias -> 512) on 6 input channels; each voxel takes its
    # first point's features (ME sparse_quantize)
    backbone=dict(type='FineGraspUNet', in_channels=6, out_channels=512, voxel_size=0.005,
                  conv_algorithm='auto'),
    crop=dict(radius=0.07, scales=(0.25, 0.5, 0.75, 1.0), channels=(256, 256),
              channels2=(256, 256), attention_dropout=0.05, hmin=-0.02, hmax=0.04, nsample=16,
              fusion_layers=2, fusion_heads=8, fusion_feedforward=1024, fusion_dropout=0.1),
    head=dict(embed_channels=64, attention_dropout=0.05),
    assigner=dict(type='EconomicAssigner', num_views=300),
    loss=dict(type='EconomicGraspLoss', objectness=1.0, graspness=10.0, view=100.0, angle=1.0,
              depth=1.0, score=1.0, width=10.0),
    # the reference's evaluation runs without collision detection (collision_thresh -1; its
    # "+CD" figures use 0.01 on a 0.01 m voxel grid); the project's recipes filter with 0.01
    test_cfg=dict(collision_thresh=0.01, collision_voxel_size=0.01, approach_dist=0.05),
    point_ops='auto',
    data_preprocessor=dict(type='GraspDataPreprocessor'))
