# GSNet on GraspNet-1Billion (RealSense), paper recipe: batch 4, 15 000 points, 1024 seeds,
# Adam 1e-3 x 0.95 per epoch, 10 epochs. Label grids are deferred: the loader ships a small
# record per object and the assigner reads only the matched rows after seed selection.
#   python tools/data/generate_graspness.py data/graspnet       # GSNet's graspness labels, once
#   python tools/train.py configs/gsnet_deferred.py
_base_ = [
    './_base_/datasets/graspnet_gsnet.py', './_base_/models/gsnet.py',
    './_base_/schedules/adam_10e.py', './_base_/default_runtime.py'
]
