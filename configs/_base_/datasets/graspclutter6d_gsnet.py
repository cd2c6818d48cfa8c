# GraspClutter6D (graspclutter6dAPI 0.0.3 layout), RealSense D435, GSNet's training recipe as on
# GraspNet-1Billion (./graspnet_gsnet.py): same pipeline, the GraspClutter6D reader (layout) and
# its evaluation protocol (GraspClutter6DMetric: widths to 0.14 m, background filter, no table,
# 13 annotations a scene, AP over split_info/grasp_test_scene_ids.json).
# Cameras: 'realsense-d415', 'realsense-d435', 'azure-kinect', 'zivid' ('realsense'/'kinect').
_base_ = ['./graspnet_gsnet.py']
data_root = 'data/graspclutter6d'
camera = 'realsense-d435'
train_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_evaluator = dict(_delete_=True, type='GraspClutter6DMetric', data_root=data_root,
                      camera=camera, dump_dir='work_dirs/dump', nproc=2)
