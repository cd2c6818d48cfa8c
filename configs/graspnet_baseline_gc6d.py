# GraspNet-baseline on GraspClutter6D (RealSense D435), graspnet_baseline_deferred.py's recipe on
# the GraspClutter6D layout; deferred label grids.
#   python tools/train.py configs/graspnet_baseline_gc6d.py
_base_ = [
    './_base_/datasets/graspclutter6d_baseline.py', './_base_/models/graspnet_baseline.py',
    './_base_/schedules/adam_step_18e.py', './_base_/default_runtime.py'
]
# BatchNorm momentum 0.5, halved every 2 epochs, floor 0.001, as graspnet-baseline's train.py sets it
custom_hooks = [dict(type='ConfigHashHook'), dict(type='BNMomentumHook')]
