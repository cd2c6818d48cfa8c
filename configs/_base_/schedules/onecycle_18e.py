# Scale-Balanced-Grasp's schedule: Adam with OneCycleLR (max lr 1e-3) stepped every
# iteration, 18 epochs.
# fused Adam (CPU and CUDA): a few multi-tensor kernels per step instead of ~8 ops per parameter.
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-3, fused=True))
param_scheduler = [dict(type='OneCycleLR', eta_max=1e-3, by_epoch=True, begin=0, end=18,
                        convert_to_iter_based=True)]
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=18)
