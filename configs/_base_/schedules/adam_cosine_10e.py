# EconomicGrasp's schedule (train.py @7361bb6, the README's run): Adam, lr 1e-3, no weight decay,
# lr = 1e-3 * (cos(pi * epoch / max_epoch) + 1) / 2 set at the start of every epoch (no warm-up,
# no clipping), 10 epochs. mmengine's epoch-based cosine with T_max = max_epochs and eta_min 0
# gives exactly these values per epoch (tests/unit/configs/test_economicgrasp_configs.py).
# fused Adam (CPU and CUDA): a few multi-tensor kernels per step instead of ~8 ops per parameter.
optim_wrapper = dict(type='OptimWrapper',
                     optimizer=dict(type='Adam', lr=1e-3, weight_decay=0.0, fused=True))
param_scheduler = [dict(type='CosineAnnealingLR', T_max=10, eta_min=0.0, by_epoch=True,
                        begin=0, end=10)]
# EpochBasedTrainLoop that also resumes mid-epoch (mmgrasp/engine/loops.py).
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=10)
