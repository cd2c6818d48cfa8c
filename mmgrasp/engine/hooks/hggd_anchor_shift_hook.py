"""HGGDAnchorShiftHook: HGGD's (γ, β) anchors move during the first epochs only."""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmgrasp.registry import HOOKS


@HOOKS.register_module()
class HGGDAnchorShiftHook(Hook):
    """Switch the anchor shift of the model's ``anchors`` (:class:`~mmgrasp.models.utils.
    hggd_anchors.HGGDAnchors`) on for epochs ``< shift_epochs`` and off after, and forget the
    labels counted in the previous epoch, before each epoch (THU-VCLab/HGGD
    ``train_graspnet.py``: ``--shift-epoch 5``, its label list is local to an epoch).

    The shift itself runs inside ``HGGD.loss``, between the label assignment and the loss, as
    the reference shifts before its loss of the same batch. The anchors are buffers, so the
    checkpoint of each epoch holds the anchors the test uses; a run resumed mid-epoch starts
    that epoch's count afresh (the reference never resumes).

    Args:
        shift_epochs: the anchors shift in epochs 0 .. shift_epochs − 1 (5).
        threshold: labels to count before a shift (the reference's 1e6).
    """

    def __init__(self, shift_epochs: int = 5, threshold: float = 1e6) -> None:
        if shift_epochs < 0 or threshold <= 0:
            raise ValueError(f'HGGDAnchorShiftHook: shift_epochs >= 0 and threshold > 0, got '
                             f'{shift_epochs}, {threshold}')
        self.shift_epochs, self.threshold = shift_epochs, threshold

    def before_train_epoch(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        anchors = getattr(model, 'anchors', None)
        if anchors is None or not hasattr(anchors, 'shift_enabled'):
            raise TypeError(f'HGGDAnchorShiftHook needs a model with HGGD anchors, got '
                            f'{type(model).__name__}')
        anchors.shift_enabled = runner.epoch < self.shift_epochs
        anchors.threshold = self.threshold
        anchors.reset()
