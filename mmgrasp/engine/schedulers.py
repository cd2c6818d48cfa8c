"""FineGrasp's learning-rate schedule (RoboOrchardLab ``projects/finegrasp_graspnet1b/configs/
config_finegrasp_minkunet.py`` @241bbc6, ``linear_warmup_with_cosdecay`` through ``LambdaLR``,
stepped every iteration)."""
import math

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from mmgrasp.registry import PARAM_SCHEDULERS


def warmup_cosine_factor(step: float, warmup: float, total: float,
                         min_scale: float = 1e-5) -> float:
    """The reference's factor of the base lr at step ``step``: linear from ``min_scale`` to 1
    over ``warmup`` steps, then ``min_scale + (1 − min_scale)·(1 + cos(π·(step − warmup) /
    total))/2`` — the cosine's phase divides by ALL ``total`` steps, not by the steps after
    the warm-up, so the last step sits at about 0.0245 of the base lr, not at 0."""
    if step < warmup:
        return (1 - min_scale) * step / warmup + min_scale
    return (1 - min_scale) * 0.5 * (1 + math.cos(math.pi * (step - warmup) / total)) + min_scale


@PARAM_SCHEDULERS.register_module()
class WarmupCosineLR(LRSchedulerMixin, _ParamScheduler):
    """lr = base lr · :func:`warmup_cosine_factor` (closed form, no chained products: the
    values are the reference's to the last bit of float64 arithmetic).

    With ``by_epoch=True`` and ``convert_to_iter_based=True`` (the FineGrasp schedule),
    ``warmup``, ``begin`` and ``end`` are epochs turned into iterations by the loader's length
    (the reference's warm-up is ``steps_per_epoch · warmup_epoch`` steps and its total
    ``max_epoch · steps_per_epoch``); ``total`` is ``end − begin``.

    Args:
        optimizer: the wrapped optimizer.
        warmup: warm-up length (steps, or epochs before conversion).
        min_scale: the factor at step 0 and the floor of the cosine (1e-5).
        begin, end, last_step, by_epoch, verbose: as mmengine's schedulers.
    """

    def __init__(self, optimizer, warmup: float, min_scale: float = 1e-5, begin: int = 0,
                 end: int = INF, last_step: int = -1, by_epoch: bool = True,
                 verbose: bool = False):
        if end == INF:
            raise ValueError('WarmupCosineLR needs a finite end (its cosine divides by the '
                             'whole length end - begin)')
        if not 0 <= warmup < end - begin:
            raise ValueError(f'WarmupCosineLR: warmup {warmup} outside [0, {end - begin})')
        self.warmup, self.min_scale, self.total = warmup, min_scale, end - begin
        super().__init__(optimizer, begin=begin, end=end, last_step=last_step,
                         by_epoch=by_epoch, verbose=verbose)

    @classmethod
    def build_iter_from_epoch(cls, *args, warmup: float, begin: int = 0, end: int = INF,
                              by_epoch: bool = True, epoch_length=None, **kwargs):
        """An iteration-based instance from an epoch-based config."""
        if not by_epoch or not epoch_length:
            raise ValueError('WarmupCosineLR.build_iter_from_epoch needs by_epoch=True and '
                             f'a positive epoch_length (got {by_epoch}, {epoch_length})')
        return cls(*args, warmup=warmup * epoch_length, begin=int(begin * epoch_length),
                   end=int(end * epoch_length) if end != INF else INF, by_epoch=False,
                   **kwargs)

    def _get_value(self):
        factor = warmup_cosine_factor(self.last_step, self.warmup, self.total, self.min_scale)
        return [group[f'initial_{self.param_name}'] * factor
                for group in self.optimizer.param_groups]

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(warmup={self.warmup}, total={self.total}, '
                f'min_scale={self.min_scale}, begin={self.begin}, end={self.end})')
