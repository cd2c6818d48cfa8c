"""Let ``torch.load`` (``weights_only=True`` by default since torch 2.6) read mmengine 0.10
Runner checkpoints without switching weights-only loading off.

mmengine pickles its message hub (``HistoryBuffer`` with numpy arrays and scalars) into every
checkpoint. We allow-list exactly those globals. ``HistoryBuffer`` pickles its statistics as
``getattr(HistoryBuffer, 'min')``; the real ``getattr`` would let a checkpoint reach any
attribute, so that name maps to a stand-in that allows only those statistics.

Scale-Balanced-Grasp's OneCycleLR keeps its annealing function (a staticmethod) in its state,
pickled as ``getattr(OneCycleParamScheduler, '_annealing_cos')``. The class name unpickles to a
token, not the class (a checkpoint can neither call nor build a scheduler), from which the
stand-in resolves only the two annealing functions. The token names the class and imports it
only when a checkpoint asks: mmengine.optim pulls in torch.distributed's optimizers (seconds of
start-up) that ``import mmgrasp`` in a data tool never needs.
"""
import importlib

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct, scalar

_HISTORY_BUFFER_STATISTICS = frozenset({'min', 'max', 'current', 'mean'})
_NUMPY_TYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                np.uint32, np.uint64, np.float16, np.float32, np.float64)


class _ClassToken:
    """What a checkpoint's reference to the class ``module.qualname`` unpickles to: only
    ``names`` can be read from it, through the getattr stand-in."""

    def __init__(self, module: str, qualname: str, names: frozenset):
        self.module, self.qualname, self.names = module, qualname, names

    @property
    def name(self) -> str:
        return f'{self.module}.{self.qualname}'

    @property
    def cls(self) -> type:
        return getattr(importlib.import_module(self.module), self.qualname)

    def __repr__(self) -> str:
        return f'<checkpoint token of {self.qualname}>'


_ONE_CYCLE = _ClassToken('mmengine.optim.scheduler.param_scheduler', 'OneCycleParamScheduler',
                         frozenset({'_annealing_cos', '_annealing_linear'}))


def _checkpoint_getattr(obj, name):
    """Stand-in for ``builtins.getattr`` inside checkpoints: HistoryBuffer statistics and
    OneCycle's annealing functions only."""
    if obj is HistoryBuffer and name in _HISTORY_BUFFER_STATISTICS:
        return getattr(obj, name)
    if obj is _ONE_CYCLE and name in obj.names:
        return getattr(obj.cls, name)
    raise RuntimeError(f'checkpoint asks for getattr({obj!r}, {name!r}); only HistoryBuffer '
                       f'statistics {sorted(_HISTORY_BUFFER_STATISTICS)} and '
                       f'OneCycleParamScheduler.{sorted(_ONE_CYCLE.names)} are allowed')


MMENGINE_SAFE_GLOBALS = [
    HistoryBuffer,
    np.ndarray,
    np.dtype,
    _reconstruct,
    scalar,
    *(type(np.dtype(t)) for t in _NUMPY_TYPES),
    (_checkpoint_getattr, 'builtins.getattr'),
    (_ONE_CYCLE, _ONE_CYCLE.name),
    # checkpoints written under numpy 1.x name the same functions by their old module
    (_reconstruct, 'numpy.core.multiarray._reconstruct'),
    (scalar, 'numpy.core.multiarray.scalar'),
]


def allow_mmengine_checkpoints() -> None:
    """Register the globals above with torch's weights-only unpickler (idempotent)."""
    if hasattr(torch.serialization, 'add_safe_globals'):
        torch.serialization.add_safe_globals(MMENGINE_SAFE_GLOBALS)
