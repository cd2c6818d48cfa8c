"""Let ``torch.load`` (``weights_only=True`` by default since torch 2.6) read mmengine 0.10
Runner checkpoints without switching weights-only loading off.

mmengine pickles its message hub (``HistoryBuffer`` with numpy arrays and scalars) into every
checkpoint. We allow-list exactly those globals. ``HistoryBuffer`` pickles its statistics as
``getattr(HistoryBuffer, 'min')``; the real ``getattr`` would let a checkpoint reach any
attribute, so that name maps to a stand-in that allows only those statistics.
"""
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


def _history_buffer_getattr(obj, name):
    """Stand-in for ``builtins.getattr`` inside checkpoints: HistoryBuffer statistics only."""
    if obj is HistoryBuffer and name in _HISTORY_BUFFER_STATISTICS:
        return getattr(obj, name)
    raise RuntimeError(f'checkpoint asks for getattr({obj!r}, {name!r}); only HistoryBuffer '
                       f'statistics {sorted(_HISTORY_BUFFER_STATISTICS)} are allowed')


MMENGINE_SAFE_GLOBALS = [
    HistoryBuffer,
    np.ndarray,
    np.dtype,
    _reconstruct,
    scalar,
    *(type(np.dtype(t)) for t in _NUMPY_TYPES),
    (_history_buffer_getattr, 'builtins.getattr'),
    # checkpoints written under numpy 1.x name the same functions by their old module
    (_reconstruct, 'numpy.core.multiarray._reconstruct'),
    (scalar, 'numpy.core.multiarray.scalar'),
]


def allow_mmengine_checkpoints() -> None:
    """Register the globals above with torch's weights-only unpickler (idempotent)."""
    if hasattr(torch.serialization, 'add_safe_globals'):
        torch.serialization.add_safe_globals(MMENGINE_SAFE_GLOBALS)
