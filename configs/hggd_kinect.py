# HGGD on GraspNet-1Billion (Kinect): hggd_realsense.py on the Kinect frames (HGGD's hard-coded
# Kinect intrinsics for its labels, cloud and xyz maps; train_graspnet.sh's camera switch).
#   python tools/train.py configs/hggd_kinect.py
#   python tools/test.py configs/hggd_kinect.py work_dirs/hggd_kinect/epoch_15.pth
_base_ = ['./hggd_realsense.py']
camera = 'kinect'
train_dataloader = dict(dataset=dict(camera=camera))
test_dataloader = dict(dataset=dict(camera=camera))
test_evaluator = dict(camera=camera)
