"""Regions that the CUDA path runs as a known number of kernel launches.

The launch counter (:mod:`mmgrasp.analysis.dispatch_count`) counts the ``aten::`` ops that
``torch.profiler`` records. A Triton or spconv kernel leaves no ``aten::`` op behind (under
``TRITON_INTERPRET=1`` it even runs in numpy), and the torch reference that stands in for it on
the CPU records many. So the code that launches such a kernel wraps the launch in
``kernel_scope(name, launches)``: the counter charges the whole region ``launches`` launches and
ignores the ops recorded inside it. Host syncs inside the region are still counted: a scope
never hides a sync.
"""
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple

from torch.profiler import record_function

#: Prefix of the profiler ranges that :func:`kernel_scope` opens: ``mmgrasp.kernel::NAME::N``.
KERNEL_SCOPE_PREFIX = 'mmgrasp.kernel::'


@contextmanager
def kernel_scope(name: str, launches: int = 1) -> Iterator[None]:
    """Mark the enclosed code as ``launches`` kernel launches of the CUDA path."""
    if launches < 0:
        raise ValueError(f'kernel_scope({name!r}): launches={launches} must be >= 0')
    if '::' in name:
        raise ValueError(f"kernel_scope({name!r}): the name may not contain '::'")
    with record_function(f'{KERNEL_SCOPE_PREFIX}{name}::{launches}'):
        yield


def parse_kernel_scope(range_name: str) -> Optional[Tuple[str, int]]:
    """``(name, launches)`` of a profiler range opened by :func:`kernel_scope`, else None."""
    if not range_name.startswith(KERNEL_SCOPE_PREFIX):
        return None
    name, _, launches = range_name[len(KERNEL_SCOPE_PREFIX):].rpartition('::')
    return name, int(launches)
