# HGGD on GraspNet-1Billion (RealSense), the reference recipe (THU-VCLab/HGGD @69580ff,
# train_graspnet.sh / test_graspnet.sh): 640 x 360 RGB-D input, AdamW 1e-2, x0.1 every 5
# epochs, 15 epochs, batch 4 with 2-step accumulation; test: 48 centres, collision filter, grasp
# NMS 0.03 m / 30 deg. The per-image grasps are built from the label store on first use.
#   python tools/data/build_hggd_labels.py data/graspnet --camera realsense   # optional, once
#   python tools/train.py configs/hggd_realsense.py
#   python tools/test.py configs/hggd_realsense.py work_dirs/hggd_realsense/epoch_15.pth
# The official checkpoint: tools/model_converters/reference_to_mmgrasp.py hggd (configs/hggd).
_base_ = ['./_base_/datasets/graspnet_hggd.py', './_base_/models/hggd.py',
          './_base_/schedules/adamw_step_15e.py']  # the schedule extends default_runtime.py
