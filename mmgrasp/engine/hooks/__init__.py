from .bn_momentum_hook import BNMomentumHook
from .checkpoint_load_hook import CheckpointLoadHook
from .config_hash_hook import ConfigHashHook, canonical_config, config_diff, config_hash
from .hggd_anchor_shift_hook import HGGDAnchorShiftHook
from .initial_checkpoint_hook import InitialCheckpointHook
from .invalid_loss_hook import InvalidLossHook, NonFiniteLossError
from .scale_statistic_hook import ScaleStatisticError, ScaleStatisticHook

__all__ = ['BNMomentumHook', 'CheckpointLoadHook', 'ConfigHashHook', 'HGGDAnchorShiftHook',
           'InitialCheckpointHook', 'InvalidLossHook', 'NonFiniteLossError', 'ScaleStatisticError',
           'ScaleStatisticHook',
           'canonical_config', 'config_diff', 'config_hash']
