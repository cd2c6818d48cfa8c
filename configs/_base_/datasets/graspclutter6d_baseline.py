# GraspClutter6D, RealSense D435, GraspNet-baseline's data recipe (also Scale-Balanced-Grasp's) as
# on GraspNet-1Billion (./graspnet_baseline.py) without its skip of GraspNet object 18, which has
# no counterpart here. Tolerance labels: <data_root>/tolerance/obj_%06d_tolerance.npy (the
# synthetic writer makes them; for a download run graspnet-baseline's rule per model).
_base_ = ['./graspnet_baseline.py']
data_root = 'data/graspclutter6d'
camera = 'realsense-d435'
train_pipeline = [
    dict(type='LoadGraspScene', num_points=20000),
    dict(type='SampleGraspLabels', point_fraction=0.25, min_points=300, min_object_points=50,
         visible_only=True, visible_distance=0.01, collision='zero_scores', tolerance=True,
         grids='deferred'),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.5235987755982988,
         apply='device'),
    dict(type='PackGraspInputs', keys=('points', 'objectness')),
]
train_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera,
                                     pipeline=train_pipeline))
test_dataloader = dict(dataset=dict(data_root=data_root, layout='graspclutter6d', camera=camera))
test_evaluator = dict(_delete_=True, type='GraspClutter6DMetric', data_root=data_root,
                      camera=camera, dump_dir='work_dirs/dump', nproc=2)
