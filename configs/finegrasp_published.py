# FineGrasp with its published weights (HorizonRobotics/FineGrasp, finegrasp_pipeline/
# model.safetensors, converted by tools/model_converters/reference_to_mmgrasp.py finegrasp,
# whose default config this is): the model of finegrasp_deferred.py fed the normals the
# reference's hub processor feeds (RoboOrchardLab @241bbc6 models/finegrasp/processor.py,
# get_normal: open3d's estimate_normals of the 20 000 sampled points, unit length, with the sign
# open3d's eigen-solver gives, not turned to the camera): orientation 'solver', scale 1. The
# reference's own training and evaluation read stored per-pixel maps divided by 255 that
# nothing in its repository writes; which of the two the published weights were trained on is
# not known (docs/user_guides/normals.md).
#   python tools/model_converters/reference_to_mmgrasp.py finegrasp model.safetensors fg.pth
#   python tools/test.py configs/finegrasp_published.py fg.pth
_base_ = ['./finegrasp_deferred.py']

estimate_normals = dict(type='EstimateNormals', radius=0.1, max_nn=30, orientation='solver',
                        scale=1.0, apply='device')
train_dataloader = dict(dataset=dict(pipeline=[
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, with_graspness=True),
    estimate_normals,
    dict(type='LoadEconomicLabels', grids='deferred', top_k=300),
    dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0, apply='device',
         flip_normals=False),
    dict(type='PackGraspInputs', keys=('points', 'normals', 'objectness', 'graspness')),
]))
test_dataloader = dict(dataset=dict(pipeline=[
    dict(type='LoadGraspScene', num_points=20000, outlier=0.02, with_masked_cloud=True),
    estimate_normals,
    dict(type='PackGraspInputs', keys=('points', 'normals'),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud')),
]))
