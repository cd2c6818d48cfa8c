# HGGD (THU-VCLab/HGGD @69580ff, train_graspnet.sh / test_graspnet.sh): AnchorGraspNet
# (ResNet-34 layout, 8 planes, 6 theta anchors at stride 8) on 640 x 360 RGB-D images, 128
# centres a frame in training and 48 at test (blurred heat > 0.01), regions of 512 points in a
# ball of the predicted width, PointMultiGraspNet on 7 x 7 (gamma, beta) anchors, the top 10
# anchors a region with |gamma| < 60 deg, the reference test script's collision filter.
# Loss weights of its training script: loc 1, reg 5, cls 1, offset 1.
model = dict(
    type='HGGD',
    anchor_net=dict(type='AnchorGraspNet', in_channels=4, num_theta_anchors=6, mid_channels=32),
    local_net=dict(type='PointMultiGraspNet', info_channels=3, num_anchors=49,
                   feature_channels=32),
    loss=dict(type='HGGDLoss', loc_weight=1.0, reg_weight=5.0, cls_weight=1.0, offset_weight=1.0,
              label_thres=0.99, label_radius=0.02, max_labels=500),
    num_anchors=7,
    train_centers=128,
    test_centers=48,
    heat_threshold=0.01,
    group_points=512,
    min_points=32,
    jitter=5e-4,
    knn=8,
    sigma=10.0,
    anchor_width=50.0,
    anchor_depth=20.0,
    top_k=10,
    max_gamma=60.0,
    seed=0,
    test_cfg=dict(collision=True, collision_voxel_size=0.01, approach_dist=0.05),
    point_ops='auto',
    data_preprocessor=dict(type='HGGDDataPreprocessor'))
