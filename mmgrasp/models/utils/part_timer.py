"""Wall time of the parts of a forward pass, so benchmarks can see where an iteration goes."""
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Dict, Iterator

import torch


class PartTimer:
    """Accumulates seconds per part name until :meth:`pop`.

    With ``synchronize=True`` (what the benchmark sets) the CUDA device is synchronised around
    each part, so asynchronous kernels are charged to the part that launched them; training
    leaves it off and pays nothing but two clock reads per part.
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
            yield
        finally:
            self._sync()
            self._seconds[name] += time.perf_counter() - start

    def pop(self) -> Dict[str, float]:
        """Seconds per part since the last pop."""
        seconds, self._seconds = dict(self._seconds), defaultdict(float)
        return seconds
