# GraspClutter6D (graspclutter6dAPI 0.0.3 layout), RealSense D435, EconomicGrasp's training data
# as on GraspNet-1Billion (./graspnet_economic.py): same pipeline, the GraspClutter6D reader and
# its evaluation protocol (GraspClutter6DMetric).
_base_ = ['./graspnet_economic.py']
data_root = 'data/graspclutter6d'
camera = 'realsense-d435'
train_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_evaluator = dict(_delete_=True, type='GraspClutter6DMetric', data_root=data_root,
                      camera=camera, dump_dir='work_dirs/dump', nproc=2)
