"""The peak of live tensor bytes of a region, per part, counted on any device (the CPU too).

A GPU's memory use cannot be read on a CPU, but what the CUDA caching allocator is asked for can
be counted: every tensor storage an op creates. :class:`LiveBytes` is a ``TorchDispatchMode``
that sees each op's outputs, adds the bytes of every storage it has not seen before, and
subtracts them when the storage dies (a ``weakref.finalize`` on the storage: torch keeps one
Python object per live storage, so the finaliser runs exactly when the memory is released).
The running sum is the live tensor bytes; its maximum is the peak.

Why not ``torch.profiler(profile_memory=True)``: it reports the CPU allocator's calls, which
include buffers a CUDA kernel never needs (a CPU matmul's packing, the torch references'
scratch inside a kernel scope, see below) and no storage identity. Counting storages gives
exactly the tensors a model holds, on the same code path the CUDA device runs.

What it charges:

- Storages alive before the region (parameters, gradients, optimiser state, the batch) are
  passed to :meth:`LiveBytes.adopt`: counted from the start, never twice.
- Parts: the profiler ranges of :class:`~mmgrasp.models.utils.part_timer.PartTimer`
  (``mmgrasp.part::NAME``) and of the tools (``mmgrasp.stage::NAME``) pass through the mode as
  ops, so each part's figure is the peak of the live total while it is the innermost range
  open; the parts' maximum is the region's peak.
- A ``kernel_scope`` (a Triton/spconv kernel, whose torch reference runs in its place on the
  CPU) is charged what the kernel allocates, its outputs: storages made inside it join the
  count when the scope closes, if still alive; the reference's temporaries never do.
- Storages on other devices than ``device`` are ignored (with ``device=None`` every storage
  counts). Caching-allocator rounding (512 B blocks) and fragmentation are not modelled: the
  figure is a lower bound of ``torch.cuda.max_memory_allocated`` by a few percent.
"""
import weakref
from typing import Dict, Iterable, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from mmgrasp.ops.kernel_scope import KERNEL_SCOPE_PREFIX
from .part_timer import PART_PREFIX

#: Range prefixes that name a part (the launch counter's stages too: ``dispatch_count.stage``).
PART_PREFIXES = (PART_PREFIX, 'mmgrasp.stage::')
_ENTER = torch.ops.profiler._record_function_enter_new.default
_EXIT = torch.ops.profiler._record_function_exit._RecordFunction


class LiveBytes(TorchDispatchMode):
    """Counts live tensor bytes while active; ``peak``, ``peaks`` (per part) afterwards.

    ``outside`` names the part of ops outside every part range."""

    def __init__(self, device: Optional[torch.device] = None, outside: str = 'other') -> None:
        super().__init__()
        self.device = None if device is None else torch.device(device)
        self.live = 0
        self.peak = 0
        self.peaks: Dict[str, int] = {}
        self._outside = outside
        self._open: List[str] = []  # names of the open ranges, innermost last
        self._seen: Dict[int, int] = {}  # id of a counted storage -> its bytes
        self._pending: List[List[weakref.ref]] = []  # per open kernel scope: storages made

    # ----------------------------------------------------------------------- counting
    def adopt(self, tensors: Iterable) -> None:
        """Count the storages of ``tensors`` (any nesting of tensors) as live from now on."""
        for leaf in tree_leaves(list(tensors)):
            if isinstance(leaf, torch.Tensor):
                self._add(leaf, pending=False)
        self._record()

    def _counts(self, tensor: torch.Tensor) -> bool:
        return self.device is None or tensor.device == self.device

    def _add(self, tensor: torch.Tensor, pending: bool) -> None:
        if not self._counts(tensor) or tensor.is_meta:
            return
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self._seen:
            return
        nbytes = storage.nbytes()
        if pending:  # inside a kernel scope: counted when the scope closes, if alive
            self._seen[key] = 0
            self._pending[-1].append(weakref.ref(storage))
            weakref.finalize(storage, self._free, key)
            return
        self._seen[key] = nbytes
        self.live += nbytes
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.live -= self._seen.pop(key, 0)

    def _part(self) -> str:
        names = [name for name in self._open if name.startswith(PART_PREFIXES)]
        if not names:
            return self._outside
        name = names[-1]
        return name[next(len(p) for p in PART_PREFIXES if name.startswith(p)):]

    def _record(self) -> None:
        part = self._part()
        self.peaks[part] = max(self.peaks.get(part, 0), self.live)
        self.peak = max(self.peak, self.live)

    # ----------------------------------------------------------------------- the mode
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is _ENTER:
            self._enter(args[0])
        elif func is _EXIT:
            self._exit()
        else:
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    self._add(leaf, pending=bool(self._pending))
            self._record()
        return out

    def _enter(self, name: str) -> None:
        self._open.append(name)
        if name.startswith(KERNEL_SCOPE_PREFIX):
            self._pending.append([])
        self._record()

    def _exit(self) -> None:
        # a range's handle comes back as another Python object, but ``record_function`` is a
        # context manager on one thread: the range closing is the innermost one open
        if not self._open:
            return
        name = self._open.pop()
        if name.startswith(KERNEL_SCOPE_PREFIX) and self._pending:
            for ref in self._pending.pop():
                storage = ref()
                if storage is not None and self._seen.get(id(storage)) == 0:
                    nbytes = storage.nbytes()
                    if self._pending:  # a scope inside a scope: the outer one decides
                        self._pending[-1].append(ref)
                    else:
                        self._seen[id(storage)] = nbytes
                        self.live += nbytes
        self._record()
