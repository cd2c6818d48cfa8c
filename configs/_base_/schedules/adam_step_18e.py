# GraspNet-baseline's schedule: Adam, lr 1e-3, x0.1 at epochs 8, 12 and 16, 18 epochs.
# (Its BatchNorm momentum decay, 0.5 halved every 2 epochs, floor 0.001, is BNMomentumHook in
# the recipes' custom_hooks: a hook list of a config replaces its base's, so each recipe names it.)
# fused Adam (CPU and CUDA): a few multi-tensor kernels per step instead of ~8 ops per parameter.
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-3, fused=True))
param_scheduler = [dict(type='MultiStepLR', milestones=[8, 12, 16], gamma=0.1, by_epoch=True)]
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=18)
