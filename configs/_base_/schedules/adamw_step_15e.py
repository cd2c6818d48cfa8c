# HGGD's schedule (THU-VCLab/HGGD train_graspnet.sh, train_utils.py get_optimizer):
# AdamW lr 1e-2, weight decay 1e-2 on every parameter (norms and biases too: one group),
# x0.1 every 5 epochs, 15 epochs, batches of 4 with the gradients of 2 batches per step.
# The reference sums the 2 batches' gradients and clips each value at 1; mmengine's
# accumulative_counts averages them (the loss / 2), so the clip is 0.5: the same clipped
# gradient, halved, which AdamW's update does not see (up to its eps). The reference's first
# step sums 3 batches and its epoch's last odd batch is dropped by the next zero_grad; here
# every step takes 2 (docs/advanced_guides/hggd_model.md).
# fused AdamW and a foreach clip: a few multi-tensor kernels per step, not ops per parameter.
# The schedule has hooks of its own, so it extends the runtime (whose custom_hooks it replaces,
# ConfigHashHook kept) instead of sitting beside it in a config's _base_ list.
_base_ = ['../default_runtime.py']
optim_wrapper = dict(type='OptimWrapper',
                     optimizer=dict(type='AdamW', lr=1e-2, weight_decay=1e-2, fused=True),
                     accumulative_counts=2,
                     clip_grad=dict(type='value', clip_value=0.5, foreach=True))
param_scheduler = [dict(type='StepLR', step_size=5, gamma=0.1, by_epoch=True)]
train_cfg = dict(type='GraspEpochBasedTrainLoop', max_epochs=15)
# the (gamma, beta) anchors shift in the first 5 epochs; the image network's BatchNorm momentum
# is 0.5 * 0.5^(epoch // 2), at least 0.001 (the local network keeps PyTorch's 0.1)
custom_hooks = [dict(type='HGGDAnchorShiftHook', shift_epochs=5, threshold=1e6),
                dict(type='BNMomentumHook', module='anchor_net', initial=0.5, decay=0.5, step=2,
                     minimum=0.001),
                dict(type='ConfigHashHook')]
