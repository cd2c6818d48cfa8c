# FineGrasp's schedule (RoboOrchardLab @241bbc6 config_finegrasp_minkunet.py): Adam lr 0.008,
# weight decay 1e-5; LambdaLR stepped every iteration with linear_warmup_with_cosdecay: one
# epoch of linear warm-up from 1e-5 x lr, then a cosine whose phase divides by ALL steps (so the
# last step is at ~0.0245 x lr, not 0); gradient norm clipped at 10; 10 epochs (the seed, 2025,
# is set in configs/finegrasp_deferred.py: default_runtime.py owns `randomness`).
optim_wrapper = dict(type='OptimWrapper',
                     optimizer=dict(type='Adam', lr=0.008, weight_decay=1e-5, fused=True),
                     clip_grad=dict(max_norm=10, norm_type=2))
param_scheduler = [dict(type='WarmupCosineLR', warmup=1, min_scale=1e-5, by_epoch=True,
                        begin=0, end=10, convert_to_iter_based=True)]
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=10)
