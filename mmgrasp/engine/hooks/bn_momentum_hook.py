"""BNMomentumHook: a step decay of the BatchNorm momentum of a model part, per epoch."""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from torch import nn

from mmgrasp.registry import HOOKS


@HOOKS.register_module()
class BNMomentumHook(Hook):
    """Before each epoch, set the momentum of every BatchNorm layer of ``model.<module>`` to
    max(``initial`` · ``decay`` ^ ⌊epoch / ``step``⌋, ``minimum``).

    HGGD (``train_graspnet.py``: ``BNMomentumScheduler`` on the image network only) uses 0.5,
    0.5, 2, 0.001: momentum 0.5 in epochs 0-1, 0.25 in 2-3, ... (PyTorch's momentum: the
    weight of the new batch). graspnet-baseline's and Scale-Balanced-Grasp's ``train.py`` use
    the same schedule on the whole model (``module=''``); their CPU demos need it: at PyTorch's
    fixed 0.1 a short training leaves eval-mode statistics so far from the batches that no seed
    passes the objectness filter (``docs/notes/benchmarks/demos.md``). mmengine's momentum
    schedulers change the optimizer's momentum, not BatchNorm's, hence this hook.

    Args:
        module: attribute of the model whose BatchNorm layers change ('' : the whole model).
        initial, decay, step, minimum: the schedule.
    """

    def __init__(self, module: str = '', initial: float = 0.5, decay: float = 0.5,
                 step: int = 2, minimum: float = 0.001) -> None:
        if step < 1 or not 0 < minimum <= initial <= 1:
            raise ValueError(f'BNMomentumHook: step >= 1 and 0 < minimum <= initial <= 1, got '
                             f'step {step}, minimum {minimum}, initial {initial}')
        self.module, self.initial, self.decay = module, initial, decay
        self.step, self.minimum = step, minimum

    def momentum(self, epoch: int) -> float:
        return max(self.initial * self.decay ** (epoch // self.step), self.minimum)

    def before_train_epoch(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        part = model.get_submodule(self.module)
        momentum = self.momentum(runner.epoch)
        for m in part.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.momentum = momentum
