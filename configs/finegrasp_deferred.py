# FineGrasp on GraspNet-1Billion (RealSense), the published recipe (HorizonRobotics/
# RoboOrchardLab @241bbc6, projects/finegrasp_graspnet1b/configs/config_finegrasp_minkunet.py):
# batch 4, 20 000 points with normals, 1 024 seeds, Adam 0.008 (weight decay 1e-5) with one epoch
# of warm-up and a cosine over all steps, gradient clip 10, 10 epochs, seed 2025. The economic
# labels are deferred: the assigner reads only the rows of the matched label points.
#   python tools/data/generate_graspness.py data/graspnet       # the graspness labels, once
#   python tools/train.py configs/finegrasp_deferred.py
#   python tools/test.py configs/finegrasp_deferred.py work_dirs/finegrasp_deferred/epoch_10.pth
_base_ = [
    './_base_/datasets/graspnet_finegrasp.py', './_base_/models/finegrasp.py',
    './_base_/schedules/adam_warmup_cosine_10e.py', './_base_/default_runtime.py'
]
# the reference's seed_everything(2025)
randomness = dict(seed=2025, deterministic=False)
