"""Mixed precision on the CPU: bfloat16 autocast, no loss scaling.

mmengine's ``AmpOptimWrapper`` refuses to start without an accelerator. On the CPU autocast
only supports bfloat16, whose exponent range is float32's, so gradients need no loss scale and
this wrapper is the plain ``OptimWrapper`` with the forward pass under autocast.
"""
from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper
from torch import nn

from mmgrasp.registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(OptimWrapper):
    """``OptimWrapper`` whose ``optim_context`` runs the forward pass under
    ``torch.autocast('cpu', dtype=torch.bfloat16)`` (what ``tools/train.py --amp`` picks on a
    machine without CUDA)."""

    def __init__(self, dtype: str = 'bfloat16', **kwargs) -> None:
        if dtype not in ('bfloat16', torch.bfloat16):
            raise ValueError(f'CPU autocast supports bfloat16 only, got dtype={dtype!r}')
        super().__init__(**kwargs)
        self.cast_dtype = torch.bfloat16

    @contextmanager
    def optim_context(self, model: nn.Module):
        with super().optim_context(model), torch.autocast('cpu', dtype=self.cast_dtype):
            yield
