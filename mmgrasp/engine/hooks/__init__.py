from .config_hash_hook import ConfigHashHook, canonical_config, config_diff, config_hash
from .scale_statistic_hook import ScaleStatisticHook

__all__ = ['ConfigHashHook', 'ScaleStatisticHook', 'canonical_config', 'config_diff',
           'config_hash']
