# GSNet's schedule: Adam, lr 1e-3, lr x 0.95 after every epoch, 10 epochs.
# fused Adam (CPU and CUDA): a few multi-tensor kernels per step instead of ~8 ops per parameter.
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-3, fused=True))
param_scheduler = [dict(type='ExponentialLR', gamma=0.95, by_epoch=True)]
# EpochBasedTrainLoop that also resumes mid-epoch (mmgrasp/engine/loops.py).
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=10)
