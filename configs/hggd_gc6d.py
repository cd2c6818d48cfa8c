# HGGD on GraspClutter6D (RealSense D435): the reference recipe (hggd_realsense.py) on the
# GraspClutter6D layout, its frames' own intrinsics and image size (not reproduced by any
# published figure: HGGD was trained on GraspNet-1Billion only).
#   python tools/train.py configs/hggd_gc6d.py
#   python tools/test.py configs/hggd_gc6d.py work_dirs/hggd_gc6d/epoch_15.pth
_base_ = ['./_base_/datasets/graspclutter6d_hggd.py', './_base_/models/hggd.py',
          './_base_/schedules/adamw_step_15e.py']  # the schedule extends default_runtime.py
