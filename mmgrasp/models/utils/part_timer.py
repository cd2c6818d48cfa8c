"""Wall time of the parts of a forward pass, so benchmarks can see where an iteration goes."""
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Dict, Iterator

import torch
from torch.profiler import record_function

#: Prefix of the profiler range each part opens (``mmgrasp.part::NAME``): the launch counter
#: (:mod:`mmgrasp.analysis.dispatch_count`) charges the ops recorded inside it to the part.
PART_PREFIX = 'mmgrasp.part::'

class PartTimer:
    """Accumulates seconds per part name until :meth:`pop`.

    With ``synchronize=True`` (what the benchmark sets) the CUDA device is synchronised around
    each part, so asynchronous kernels are charged to the part that launched them; training
    leaves it off and pays nothing but two clock reads per part. Each part is also a
    ``torch.profiler`` range named ``PART_PREFIX + name`` (free while no profiler runs).
    """

    def __init__(self, synchronize: bool = False):
        self.synchronize = synchronize
        self._seconds: Dict[str, float] = defaultdict(float)

    def _sync(self) -> None:
        if self.synchronize and torch.cuda.is_available():
            torch.cuda.synchronize()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self._sync()
        start = time.perf_counter()
        try:
            with record_function(PART_PREFIX + name):
                yield
        finally:
            self._sync()
            self._seconds[name] += time.perf_counter() - start

    def pop(self) -> Dict[str, float]:
        """Seconds per part since the last pop."""
        seconds, self._seconds = dict(self._seconds), defaultdict(float)
        return seconds
