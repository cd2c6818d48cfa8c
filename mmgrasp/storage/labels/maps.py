"""Memory maps of label store files: opened lazily, bounded in number, read ahead on a cold page
cache, and checked against the file on disk at every use.

- **Bounded.** One map (one file descriptor) per label file read, at most half of the soft
  ``ulimit -n`` and at most 4096; past that the least recently used map is closed, and reopened
  when needed again.
- **Read-ahead.** The first time a process maps a file, the file is also read front to back on
  one of two background threads (two sequential streams), so a cold page cache fills at disk
  speed instead of one random page fault at a time. The threads end when their queue is empty.
  ``MMGRASP_LABEL_READ_AHEAD=0`` switches it off: do that where memory cannot hold the label
  files (the read-ahead would only evict pages that are needed).
- **Checked.** A file deleted, truncated or replaced while mapped raises
  :class:`LabelFileChanged` on its next use, naming the file: a wrong value is never used
  silently. (Truncation *during* a copy cannot be caught this way and kills the process with
  SIGBUS.) A rebuild never does this: it writes a new version of the store beside the one a
  running job reads (see :mod:`.derived_assets`); only a hand-edited store file can.
- **Fork-safe.** A forked DataLoader worker starts with no maps and no read-ahead threads.
- **Thread-safe.** One lock guards the cache, so a threaded forward can share it.
"""
import os
import resource
import threading
from collections import OrderedDict, deque
from typing import Deque, NamedTuple, Optional, Set

import numpy as np

from ..remote.sources import is_url
from ..remote.store import url_local_copy

_READ_CHUNK = 8 << 20


class LabelFileChanged(OSError):
    """A label store file changed on disk while a run had it mapped."""


def open_map_limit() -> int:
    """Memory maps kept open at once: half the soft ``ulimit -n``, at most 4096."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(1, min(4096, soft // 2))


def read_ahead_enabled() -> bool:
    return os.environ.get('MMGRASP_LABEL_READ_AHEAD', '1') != '0'


class ReadAhead:
    """Reads submitted files front to back on up to ``threads`` daemon threads."""

    def __init__(self, threads: int = 2):
        self.threads = threads
        self._queue: Deque[str] = deque()
        self._lock = threading.Lock()
        self._workers: Set[threading.Thread] = set()

    @property
    def active(self) -> int:
        with self._lock:
            return len(self._workers)

    def submit(self, path: str) -> None:
        with self._lock:
            self._queue.append(path)
            if len(self._workers) < self.threads:
                worker = threading.Thread(target=self._run, name='mmgrasp-read-ahead',
                                          daemon=True)
                self._workers.add(worker)
                worker.start()

    def _run(self) -> None:
        buffer = bytearray(_READ_CHUNK)
        while True:
            with self._lock:
                if not self._queue:
                    self._workers.discard(threading.current_thread())
                    return
                path = self._queue.popleft()
            try:
                with open(path, 'rb', buffering=0) as f:
                    while f.readinto(buffer):
                        pass
            except OSError:
                pass  # the map that reads this file reports the problem

    def wait(self) -> None:
        """Block until the queue is drained (benchmarks and tests)."""
        while True:
            with self._lock:
                workers = list(self._workers)
            if not workers:
                return
            for worker in workers:
                worker.join()


class _Mapped(NamedTuple):
    array: np.ndarray
    identity: tuple


def _identity(path: str) -> tuple:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LabelFileChanged(f'label store file {path} was deleted while in use; rebuild the '
                               f'store with tools/data/build_label_store.py and restart the run')
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class MapCache:
    """Open memory maps by path (plain strings: Path objects cost a dozen lstat calls each on a
    network file system)."""

    def __init__(self, limit: Optional[int] = None, read_ahead: Optional[bool] = None):
        self.limit = limit or open_map_limit()
        self._maps: 'OrderedDict[str, _Mapped]' = OrderedDict()
        self._seen: Set[str] = set()
        self._lock = threading.Lock()
        enabled = read_ahead_enabled() if read_ahead is None else read_ahead
        self.read_ahead = ReadAhead() if enabled else None

    def __len__(self) -> int:
        return len(self._maps)

    def get(self, path: str) -> np.ndarray:
        with self._lock:
            return self._get(path)

    def _get(self, path: str) -> np.ndarray:
        if is_url(path):  # a small file of a published store: its local mirror copy
            path = url_local_copy(path)
        identity = _identity(path)
        mapped = self._maps.pop(path, None)
        if mapped is not None and mapped.identity != identity:
            raise LabelFileChanged(
                f'label store file {path} was replaced, modified or truncated while mapped '
                f'(size {mapped.identity[2]} -> {identity[2]} bytes); rebuild the store with '
                f'tools/data/build_label_store.py and restart the run')
        if mapped is None:
            while len(self._maps) >= self.limit:
                self._maps.popitem(last=False)
            try:
                array = np.load(path, mmap_mode='r', allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise LabelFileChanged(f'label store file {path} cannot be mapped ({exc}); '
                                       f'rebuild the store with tools/data/build_label_store.py'
                                       ) from exc
            mapped = _Mapped(array, identity)
            if self.read_ahead is not None and path not in self._seen:
                self._seen.add(path)
                self.read_ahead.submit(path)
        self._maps[path] = mapped
        return mapped.array


_maps = MapCache()


def open_maps() -> MapCache:
    """This process's map cache (a forked worker gets a new, empty one)."""
    return _maps


def _forget_parent_maps() -> None:
    global _maps
    _maps = MapCache()


os.register_at_fork(after_in_child=_forget_parent_maps)
