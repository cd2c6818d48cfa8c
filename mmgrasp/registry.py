"""mmgrasp's registries: children of mmengine's, scope ``mmgrasp``.

``locations`` lets a config built under ``default_scope='mmgrasp'`` find a class without the
caller importing its module first (mmengine imports them on the first lookup).
"""
from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import EVALUATOR as MMENGINE_EVALUATOR
from mmengine.registry import FUNCTIONS as MMENGINE_FUNCTIONS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOG_PROCESSORS as MMENGINE_LOG_PROCESSORS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import OPTIMIZERS as MMENGINE_OPTIMIZERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import RUNNERS as MMENGINE_RUNNERS
from mmengine.registry import TASK_UTILS as MMENGINE_TASK_UTILS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import VISBACKENDS as MMENGINE_VISBACKENDS
from mmengine.registry import VISUALIZERS as MMENGINE_VISUALIZERS
from mmengine.registry import Registry

RUNNERS = Registry('runner', parent=MMENGINE_RUNNERS, locations=['mmgrasp.engine'])
LOOPS = Registry('loop', parent=MMENGINE_LOOPS, locations=['mmgrasp.engine'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, locations=['mmgrasp.engine.hooks'])
LOG_PROCESSORS = Registry('log_processor', parent=MMENGINE_LOG_PROCESSORS,
                          locations=['mmgrasp.engine'])

DATASETS = Registry('dataset', parent=MMENGINE_DATASETS, locations=['mmgrasp.datasets'])
DATA_SAMPLERS = Registry('data sampler', parent=MMENGINE_DATA_SAMPLERS,
                         locations=['mmgrasp.datasets'])
TRANSFORMS = Registry('transform', parent=MMENGINE_TRANSFORMS,
                      locations=['mmgrasp.datasets.transforms'])
# Collate functions must be named 'mmgrasp.<name>' in configs: mmengine looks a bare name up
# in its root FUNCTIONS registry only.
FUNCTIONS = Registry('function', parent=MMENGINE_FUNCTIONS, locations=['mmgrasp.datasets'])

MODELS = Registry('model', parent=MMENGINE_MODELS, locations=['mmgrasp.models'])
MODEL_WRAPPERS = Registry('model_wrapper', parent=MMENGINE_MODEL_WRAPPERS,
                          locations=['mmgrasp.models'])
TASK_UTILS = Registry('task util', parent=MMENGINE_TASK_UTILS, locations=['mmgrasp.models'])

OPTIMIZERS = Registry('optimizer', parent=MMENGINE_OPTIMIZERS, locations=['mmgrasp.engine'])
OPTIM_WRAPPERS = Registry('optim_wrapper', parent=MMENGINE_OPTIM_WRAPPERS,
                          locations=['mmgrasp.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = Registry('optimizer wrapper constructor',
                                      parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
                                      locations=['mmgrasp.engine'])
PARAM_SCHEDULERS = Registry('parameter scheduler', parent=MMENGINE_PARAM_SCHEDULERS,
                            locations=['mmgrasp.engine'])

METRICS = Registry('metric', parent=MMENGINE_METRICS, locations=['mmgrasp.evaluation'])
EVALUATOR = Registry('evaluator', parent=MMENGINE_EVALUATOR,
                     locations=['mmgrasp.evaluation'])
VISUALIZERS = Registry('visualizer', parent=MMENGINE_VISUALIZERS)
VISBACKENDS = Registry('vis_backend', parent=MMENGINE_VISBACKENDS)


def build_in_scope(registry: Registry, cfg, **default_args):
    """Build ``cfg`` in mmgrasp's scope whatever the current default scope is (a Runner or test
    of another scope): bare type names resolve to mmgrasp's registries, then mmengine's.
    A module instance is returned as it is."""
    if not isinstance(cfg, dict):
        return cfg
    return registry.build({'_scope_': 'mmgrasp', **cfg}, default_args=default_args or None)
