# Scale-Balanced-Grasp on GraspNet-1Billion (RealSense): GraspNet-baseline's data recipe, light
# Point Transformer backbone, multi-scale crops, width-histogram reweighting from the scale
# statistic (computed from 3 200 frames of this recipe when missing, then cached; shared by the
# dense and deferred runs), OneCycleLR, 18 epochs. Deferred grids.
_base_ = [
    './_base_/datasets/graspnet_baseline.py', './_base_/models/scale_balanced_grasp.py',
    './_base_/schedules/onecycle_18e.py', './_base_/default_runtime.py'
]
# BatchNorm momentum 0.5, halved every 2 epochs, floor 0.001, as SBG's train.py sets it
custom_hooks = [dict(type='ConfigHashHook'), dict(type='ScaleStatisticHook', num_frames=3200),
                dict(type='BNMomentumHook')]
