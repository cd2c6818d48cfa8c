# EconomicGrasp on GraspClutter6D (RealSense D435), the GraspNet-1Billion recipe
# (economicgrasp_deferred.py) on the GraspClutter6D layout; deferred economic labels.
#   python tools/data/generate_graspness.py data/graspclutter6d --camera realsense-d435
#   python tools/train.py configs/economicgrasp_gc6d.py
#   python tools/test.py configs/economicgrasp_gc6d.py work_dirs/economicgrasp_gc6d/epoch_10.pth
_base_ = [
    './_base_/datasets/graspclutter6d_economic.py', './_base_/models/economicgrasp.py',
    './_base_/schedules/adam_cosine_10e.py', './_base_/default_runtime.py'
]
