# Scale-Balanced-Grasp on GraspClutter6D (RealSense D435), scale_balanced_deferred.py's recipe on
# the GraspClutter6D layout (the scale statistic is computed from this dataset's frames).
#   python tools/train.py configs/scale_balanced_gc6d.py
_base_ = [
    './_base_/datasets/graspclutter6d_baseline.py', './_base_/models/scale_balanced_grasp.py',
    './_base_/schedules/onecycle_18e.py', './_base_/default_runtime.py'
]
# BatchNorm momentum 0.5, halved every 2 epochs, floor 0.001, as SBG's train.py sets it
custom_hooks = [dict(type='ConfigHashHook'), dict(type='ScaleStatisticHook', num_frames=3200),
                dict(type='BNMomentumHook')]
