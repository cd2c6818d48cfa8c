# EconomicGrasp on GraspNet-1Billion (RealSense), the published recipe (iSEE-Laboratory/
# EconomicGrasp @7361bb6, its README's run): batch 4, 20 000 points, 1 024 seeds, Adam 1e-3 with
# a per-epoch cosine, 10 epochs. The economic labels are deferred: the loader ships a small record
# per scene and the assigner reads only the rows of the matched label points after seed selection.
#   python tools/data/generate_graspness.py data/graspnet       # the graspness labels, once
#   python tools/train.py configs/economicgrasp_deferred.py
#   python tools/test.py configs/economicgrasp_deferred.py \
#       work_dirs/economicgrasp_deferred/epoch_10.pth
# Official weights: tools/model_converters/reference_to_mmgrasp.py economicgrasp SRC DST
_base_ = [
    './_base_/datasets/graspnet_economic.py', './_base_/models/economicgrasp.py',
    './_base_/schedules/adam_cosine_10e.py', './_base_/default_runtime.py'
]
