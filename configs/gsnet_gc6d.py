# GSNet on GraspClutter6D (RealSense D435), the GraspNet-1Billion paper recipe
# (gsnet_deferred.py) on the GraspClutter6D layout; deferred label grids.
#   python tools/data/generate_graspness.py data/graspclutter6d --camera realsense-d435
#   python tools/train.py configs/gsnet_gc6d.py
#   python tools/test.py configs/gsnet_gc6d.py work_dirs/gsnet_gc6d/epoch_10.pth
_base_ = [
    './_base_/datasets/graspclutter6d_gsnet.py', './_base_/models/gsnet.py',
    './_base_/schedules/adam_10e.py', './_base_/default_runtime.py'
]
