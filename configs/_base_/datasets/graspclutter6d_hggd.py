# GraspClutter6D (RealSense D435), HGGD's image recipe (graspnet_hggd.py) on the GraspClutter6D
# layout: the per-image grasps are projected with the frame's own intrinsics at its own image
# size (HGGD hard-codes only GraspNet-1Billion's), evaluated with GraspClutter6D's protocol.
_base_ = ['./graspnet_hggd.py']
data_root = 'data/graspclutter6d'
camera = 'realsense-d435'
train_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_evaluator = dict(_delete_=True, type='GraspClutter6DMetric', data_root=data_root,
                      camera=camera, dump_dir='work_dirs/dump', nproc=2)
