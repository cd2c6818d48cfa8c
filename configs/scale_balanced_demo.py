# Scale-Balanced-Grasp demo for a 2-core CPU on the synthetic dataset: the paper's data recipe
# and a smaller network; the scale statistic from the demo's 16 frames (empty width bins are
# given a count of 1 so every bin has a weight).
#   bash tools/run_demo.sh   (writes data/synthetic once), then
#   python tools/train.py configs/scale_balanced_demo.py
_base_ = ['./scale_balanced_deferred.py']

data_root = 'data/synthetic'
train_dataloader = dict(num_workers=2, dataset=dict(data_root=data_root))
# The synthetic test scenes (100 seen, 130 similar, 160 novel), evaluated as GraspNet-1Billion.
test_dataloader = dict(dataset=dict(data_root=data_root, split='test'))
test_evaluator = dict(data_root=data_root)
model = dict(
    backbone=dict(npoints=(512, 256), nsamples=(32, 16), scale=0.25),
    crop=dict(nsample=32, channels=(16, 32, 64)),
    operation=dict(hidden=32),
    tolerance=dict(hidden=32))
# BatchNorm momentum as SBG's train.py sets it (BNMomentumHook; why: graspnet_baseline_demo.py).
# epoch_0.pth: the untrained weights (same seed), the baseline the trained AP is compared with
custom_hooks = [dict(type='ConfigHashHook'),
                dict(type='ScaleStatisticHook', num_frames=16, min_count=1),
                dict(type='BNMomentumHook'), dict(type='InitialCheckpointHook')]
train_cfg = dict(max_epochs=4)
# The one cycle over the demo's 4 epochs, as a full training gets it (warm-up, peak 1e-3, then
# annealed to ~0): the base's spans 18, so 4 epochs would stop in its warm-up (lr 8.4e-4 and
# rising at the last step).
param_scheduler = [dict(type='OneCycleLR', eta_max=1e-3, by_epoch=True, begin=0, end=4,
                        convert_to_iter_based=True)]
default_hooks = dict(logger=dict(interval=4))
# 1 torch thread whatever the machine has (why: gsnet_demo.py).
env_cfg = dict(num_threads=1)
