"""CheckpointLoadHook: the Runner loads only checkpoints that fit its model, or says what not."""
import logging

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from mmgrasp.registry import HOOKS
from mmgrasp.utils.checkpoint_keys import check_checkpoint


@HOOKS.register_module()
class CheckpointLoadHook(Hook):
    """Check every checkpoint the Runner loads against its model before mmengine applies it.

    Why: mmengine loads ``load_from`` with ``strict=False``, so a checkpoint of another model
    (or a partly matching one) gives a partly initialised model without an error. This hook sees
    the loaded checkpoint first (``after_load_checkpoint`` runs before the weights are copied)
    and raises :class:`~mmgrasp.utils.checkpoint_keys.CheckpointMismatchError` naming the
    missing, unexpected and mis-shaped keys. With ``partial`` (fine-tuning: the config's
    ``load_from_partial=True``, see tools/train.py) it only logs every key that was not loaded.
    tools/train.py and tools/test.py register it.

    Args:
        source: what is loaded, for the messages (the checkpoint path).
        partial: allow a checkpoint that fits in part.
    """

    priority = 'LOW'  # after ConfigHashHook, whose message explains a resume across configs

    def __init__(self, source: str = 'checkpoint', partial: bool = False):
        self.source, self.partial = source, partial

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        report = check_checkpoint(
            model, checkpoint, self.source, self.partial,
            hint='To fine-tune from the tensors that fit, set load_from_partial=True in the '
                 'config (training only; evaluation and resuming always load strictly).')
        if report:
            print_log(f'{self.source}: loaded in part (load_from_partial=True); not loaded:\n  '
                      + '\n  '.join(report.lines()), logger='current', level=logging.WARNING)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(source={self.source!r}, partial={self.partial})'
