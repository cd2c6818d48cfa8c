"""Recompute a region's saved tensors in the backward pass instead of keeping them.

``recomputed(fn, *args)`` runs ``fn`` as usual (its graph, its outputs), but every tensor that
autograd saves inside it is dropped at once and recomputed, by running ``fn`` again on the
same arguments, when the backward pass first needs one of them. The same ops on the same
inputs give the same values, so the gradients are those of the plain call; what is saved is
released node by node as the backward pass goes, as without recomputation. Only for regions
without random draws.

Why not ``torch.utils.checkpoint``: the same mechanism (saved-tensor hooks, recomputation on
the first unpack), but its first call imports ``torch._dynamo`` (seconds to tens of seconds
on a loaded machine), in every process that trains.
"""
import weakref
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Callable, ContextManager, Iterator, List

import torch
from torch import Tensor, nn


class _Holder:
    """Stands for one saved tensor; the recomputed tensor lives while its holder does."""
    __slots__ = ('__weakref__', )


class _Region:

    def __init__(self, fn: Callable, args: tuple, context: Callable[[], ContextManager]):
        self.fn, self.args, self.context = fn, args, context
        # the backward pass runs outside the forward's autocast: recompute inside it again
        self.autocast = [(device, torch.get_autocast_dtype(device),
                          torch.is_autocast_enabled(device)) for device in ('cpu', 'cuda')]
        self.holders: List[weakref.ref] = []
        self.values: 'weakref.WeakKeyDictionary[_Holder, Tensor]' = weakref.WeakKeyDictionary()

    def pack(self, tensor: Tensor) -> _Holder:
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        if holder not in self.values:
            self._recompute()
        return self.values[holder]

    def _recompute(self) -> None:
        saved: List[Tensor] = []

        def keep(tensor: Tensor) -> None:
            saved.append(tensor.detach())

        with ExitStack() as stack:
            for device, dtype, enabled in self.autocast:
                stack.enter_context(torch.autocast(device, dtype, enabled))
            stack.enter_context(torch.enable_grad())
            stack.enter_context(self.context())
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(keep, lambda _: None))
            self.fn(*self.args)
        if len(saved) != len(self.holders):
            name = getattr(self.fn, '__qualname__', self.fn)
            raise RuntimeError(f'recomputed: {name} saved {len(saved)} tensors when '
                               f'recomputed, {len(self.holders)} in the forward pass')
        for ref, tensor in zip(self.holders, saved):
            holder = ref()
            if holder is not None:
                self.values[holder] = tensor


def recomputed(fn: Callable, *args,
               context: Callable[[], ContextManager] = nullcontext):
    """``fn(*args)``, its saved tensors recomputed in the backward pass; ``context()`` is
    entered around the recomputation (e.g. :func:`scratch_running_stats`)."""
    region = _Region(fn, args, context)
    with torch.autograd.graph.saved_tensors_hooks(region.pack, region.unpack):
        return fn(*args)


@contextmanager
def scratch_running_stats(module: nn.Module) -> Iterator[None]:
    """The batch norms of ``module`` update scratch buffers instead of their running
    statistics and counters (a recomputation must not update them twice); the normalisation,
    with the batch's statistics, and what is saved for the backward pass are unchanged."""
    names = ('running_mean', 'running_var', 'num_batches_tracked')
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    kept = [{n: m._buffers[n] for n in names} for m in norms]
    for m, buffers in zip(norms, kept):
        m._buffers.update({n: torch.empty_like(b) for n, b in buffers.items()})
    try:
        yield
    finally:
        for m, buffers in zip(norms, kept):
            m._buffers.update(buffers)
