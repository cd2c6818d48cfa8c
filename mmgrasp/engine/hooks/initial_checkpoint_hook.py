"""InitialCheckpointHook: keep the weights a training starts from, as a checkpoint."""
from typing import Optional

from mmengine.hooks import Hook

from mmgrasp.registry import HOOKS


@HOOKS.register_module()
class InitialCheckpointHook(Hook):
    """Save the model as ``<work_dir>/<filename>`` before the first training step.

    Why: the untrained model (same seed, same config) is the baseline a trained checkpoint's
    figures are compared against; ``tools/test.py CONFIG work_dir/epoch_0.pth`` evaluates it like
    any checkpoint. Weights only (no optimizer or scheduler state), ``meta`` epoch and iter 0.
    A resumed run (iteration > 0) writes nothing, so the file keeps the first start's weights.

    Args:
        filename: checkpoint name in the work dir.
    """

    priority = 'VERY_LOW'

    def __init__(self, filename: str = 'epoch_0.pth'):
        self.filename = filename

    def before_train(self, runner) -> None:
        if runner.iter > 0:
            return
        runner.save_checkpoint(runner.work_dir, self.filename, save_optimizer=False,
                               save_param_scheduler=False, meta=dict(epoch=0, iter=0))

    def __repr__(self) -> str:
        return f'{type(self).__name__}(filename={self.filename!r})'
