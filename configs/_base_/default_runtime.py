# Runtime shared by every mmgrasp config. Import-free on purpose: mmengine parses a config file
# that imports any module outside the interpreter's own (numpy, or even os in a virtualenv) as a
# pure-python "lazy" config, where _base_ lists and dict merging no longer work as written here.
default_scope = 'mmgrasp'

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=10),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=True, interval=1, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    # stop at the first non-finite loss or weight, naming the iteration, every loss term and
    # the (epoch, sample_idx) of each frame of the batch (mmengine accepts None only for its
    # own default hooks: to run without it, delete the key from the loaded Config)
    invalid_loss=dict(type='InvalidLossHook'))

# ConfigHashHook writes the config hash into every checkpoint and refuses to resume under a
# different config. A config that sets its own custom_hooks replaces this list: keep the hook.
custom_hooks = [dict(type='ConfigHashHook')]
# True: resume across a config mismatch with a warning listing the differences
# (--cfg-options allow_config_mismatch=True). Not part of the config hash.
allow_config_mismatch = False

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))  # tools/train.py switches to gloo on a CPU-only machine

log_processor = dict(type='LogProcessor', window_size=50, by_epoch=True)
log_level = 'INFO'
load_from = None
# True: fine-tune from a load_from that fits the model only in part; the missing, unexpected and
# mis-shaped keys are logged and left as initialised. False (default): such a load_from is
# refused, naming the keys. Resuming and tools/test.py always load strictly (CheckpointLoadHook,
# registered by tools/train.py and tools/test.py). Not part of the config hash.
load_from_partial = False
resume = False

# A fixed seed, never None: the train sampler shuffles with seed + epoch, and with seed=None a
# resumed run would draw a new one (mmengine builds the sampler before it reads the
# checkpoint's seed). GraspNetDataset(seed=...) seeds the per-sample streams separately;
# configs may set both from one variable.
randomness = dict(seed=0, deterministic=False)
