# GraspNet-baseline on GraspNet-1Billion (RealSense): batch 2, 20 000 points, 1024 seeds,
# visible label points with tolerance, Adam 1e-3 x0.1 at 8/12/16, 18 epochs. Deferred grids.
# Tolerance labels: graspnet-baseline's dataset/generate_tolerance_label.py writes them; put
# them in <data_root>/tolerance or set SampleGraspLabels(tolerance_dir=...).
#   python tools/train.py configs/graspnet_baseline_deferred.py
_base_ = [
    './_base_/datasets/graspnet_baseline.py', './_base_/models/graspnet_baseline.py',
    './_base_/schedules/adam_step_18e.py', './_base_/default_runtime.py'
]
# BatchNorm momentum 0.5, halved every 2 epochs, floor 0.001, as graspnet-baseline's train.py sets it
custom_hooks = [dict(type='ConfigHashHook'), dict(type='BNMomentumHook')]
