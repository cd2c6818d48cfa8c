"""ScaleStatisticHook: give a Scale-Balanced-Grasp assigner its width statistic before training."""
import os
from typing import Any, Optional

from mmengine.dist import broadcast_object_list, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from mmgrasp.models.assigners import ScaleBalancedAssigner, load_or_compute_scale_statistic
from mmgrasp.models.assigners.scale_statistic import statistic_path
from mmgrasp.registry import HOOKS

_PLAIN = (bool, int, float, str, type(None))


class ScaleStatisticError(ValueError):
    """A width bin of the statistic counts no label point: a setting to change (num_frames or
    min_count), which the tools report in one line."""


def _hook_key(runner) -> str:
    """The config key of this hook (``custom_hooks.I``) for the message's --cfg-options."""
    hooks = (getattr(runner, 'cfg', None) or {}).get('custom_hooks') or []
    for i, hook in enumerate(hooks):
        if str(hook.get('type', '')).split('.')[-1] == 'ScaleStatisticHook':
            return f'custom_hooks.{i}'
    return 'custom_hooks.I'


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def scale_statistic_recipe(dataset) -> dict:
    """What the statistic of ``dataset`` depends on: its selection (data root, split, camera,
    scenes, frames, seed) and its pipeline — each transform's ``config()`` where it has one
    (SampleGraspLabels' leaves out ``grids``, so dense and deferred runs share the cached
    file), else its type and plain public attributes."""
    missing = [a for a in ('data_root', 'split', 'camera', 'pipeline') if not hasattr(dataset, a)]
    if missing:
        raise TypeError(f'ScaleStatisticHook: the training dataset ({type(dataset).__name__}) '
                        f'has no {missing}; it needs a GraspNetDataset (unwrapped)')
    transforms = []
    for transform in dataset.pipeline.transforms:
        if callable(getattr(transform, 'config', None)):
            transforms.append(transform.config())
        else:
            attributes = {k: list(v) if isinstance(v, tuple) else v
                          for k, v in sorted(vars(transform).items())
                          if not k.startswith('_') and _plain(v)}
            transforms.append(dict(type=type(transform).__name__, **attributes))
    scenes = getattr(dataset, 'scenes', None)
    return dict(data_root=os.path.abspath(dataset.data_root), split=dataset.split,
                camera=dataset.camera, scenes=list(scenes) if isinstance(scenes, (list, tuple))
                else scenes, frames=getattr(dataset, 'frames', None),
                seed=getattr(dataset, 'seed', None), pipeline=transforms)


@HOOKS.register_module()
class ScaleStatisticHook(Hook):
    """Before training, give the model's :class:`ScaleBalancedAssigner` its scale statistic
    (the width histogram of the best grasps of the first ``num_frames`` training samples), read
    from the cache under ``$MMGRASP_CACHE/derived`` or computed there once.

    Does nothing when the model has no ScaleBalancedAssigner at ``model.assigner`` or it already
    has a statistic (e.g. ``scale_statistic=`` in the config). The cache key is
    :func:`scale_statistic_recipe` of the training dataset plus ``num_frames``. Under
    distributed training the main process reads or computes the statistic and broadcasts it.

    Priority: NORMAL (``before_train`` only; any order works, the statistic is needed from the
    first training iteration on).

    Args:
        num_frames: samples counted (Scale-Balanced-Grasp: 3200); fewer when the dataset is
            smaller.
        cache_dir: cache root (default ``$MMGRASP_CACHE``).
        min_count: when set, bins counting fewer label points are raised to this count before
            the weights are derived (the cached file keeps the raw counts). A small demo
            dataset may leave a width bin empty, which has no weight (1 − ln 0); the
            reference statistic has none empty. None (default): an empty bin is an error.
    """

    priority = 'NORMAL'

    def __init__(self, num_frames: int = 3200, cache_dir: Optional[str] = None,
                 min_count: Optional[int] = None):
        if num_frames < 1:
            raise ValueError(f'ScaleStatisticHook: num_frames must be >= 1, got {num_frames}')
        if min_count is not None and min_count < 1:
            raise ValueError(f'ScaleStatisticHook: min_count must be >= 1 or None, got '
                             f'{min_count}')
        self.num_frames = num_frames
        self.cache_dir = cache_dir
        self.min_count = min_count

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        assigner = getattr(model, 'assigner', None)
        if not isinstance(assigner, ScaleBalancedAssigner) or assigner.bin_weights is not None:
            return
        dataset = runner.train_dataloader.dataset
        recipe = scale_statistic_recipe(dataset)
        statistic = [None]
        if is_main_process():
            statistic[0] = load_or_compute_scale_statistic(dataset, recipe, self.num_frames,
                                                           self.cache_dir)
        broadcast_object_list(statistic)
        statistic = statistic[0]
        if self.min_count is not None:
            statistic = dict(statistic, num=[max(n, self.min_count) for n in statistic['num']])
        empty = sum(n <= 0 for n in statistic['num'])
        if empty:
            path = statistic_path(dict(recipe, num_frames=self.num_frames), self.cache_dir)
            raise ScaleStatisticError(
                f'ScaleStatisticHook: {empty} of {len(statistic["num"])} width bins count no '
                f'label point in the first {self.num_frames} samples ({path}), and the width '
                f'weights (1 - ln(count / largest count)) need every bin: count more frames '
                f'(num_frames) or, on a small or own-object dataset, raise empty bins with '
                f'min_count=1 (--cfg-options {_hook_key(runner)}.min_count=1)')
        assigner.set_scale_statistic(statistic)
        print_log(f'ScaleStatisticHook: scale statistic of {sum(statistic["num"])} label '
                  f'points set on the assigner', logger='current')
