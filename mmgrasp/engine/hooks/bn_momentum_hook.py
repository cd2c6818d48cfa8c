"""BNMomentumHook: GraspNet-baseline's and Scale-Balanced-Grasp's BatchNorm momentum decay."""
from mmengine.hooks import Hook
from torch.nn.modules.batchnorm import _BatchNorm

from mmgrasp.registry import HOOKS


@HOOKS.register_module()
class BNMomentumHook(Hook):
    """Set the momentum of every BatchNorm layer at the start of each training epoch to
    ``max(init * rate ** (epoch // step), minimum)`` (PyTorch's convention: the weight of the new
    batch in the running statistics).

    Why: graspnet-baseline's and Scale-Balanced-Grasp's ``train.py`` do this
    (``BNMomentumScheduler``: 0.5, halved every 2 epochs, at least 0.001). With PyTorch's fixed
    0.1 a short training keeps part of the running statistics' initial values (0 and 1) and
    lags behind its weights; eval mode, which uses them, then sees other features than
    training did: after the 32 steps of the CPU demos no seed passed the objectness filter
    (``docs/notes/benchmarks/demos.md``). The momentum changes no weight: training-mode
    outputs use the batch statistics. It is not saved in checkpoints; a resumed run sets it
    again from its epoch. Only ``torch.nn`` BatchNorm modules are set: code that calls
    ``F.batch_norm`` with a momentum of its own (FineGrasp's stacked group heads) keeps it.

    Args:
        init: momentum of epochs ``0 .. step - 1`` (0.5).
        rate: factor applied every ``step`` epochs (0.5).
        step: epochs between decays (2).
        minimum: lower bound of the momentum (0.001).
    """

    priority = 'NORMAL'

    def __init__(self, init: float = 0.5, rate: float = 0.5, step: int = 2,
                 minimum: float = 0.001):
        if not 0 < init <= 1 or not 0 < rate <= 1 or not 0 <= minimum <= init:
            raise ValueError(f'BNMomentumHook needs 0 < init <= 1, 0 < rate <= 1 and '
                             f'0 <= minimum <= init, got init={init}, rate={rate}, '
                             f'minimum={minimum}')
        if not isinstance(step, int) or step < 1:
            raise ValueError(f'BNMomentumHook: step must be a positive int, got {step!r}')
        self.init, self.rate, self.step, self.minimum = init, rate, step, minimum

    def momentum(self, epoch: int) -> float:
        """The momentum of training epoch ``epoch`` (0-based)."""
        return max(self.init * self.rate ** (epoch // self.step), self.minimum)

    def before_train_epoch(self, runner) -> None:
        momentum = self.momentum(runner.epoch)
        for module in runner.model.modules():
            if isinstance(module, _BatchNorm):
                module.momentum = momentum

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(init={self.init}, rate={self.rate}, step={self.step}, '
                f'minimum={self.minimum})')
