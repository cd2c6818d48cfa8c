"""Blocks of remote files on local disk: one sparse file per remote file version, a checksum
log, a byte budget with the least recently used files out, kept across restarts.

Layout, per remote file version (the key hashes the URL, the store version and the size, so two
versions never share one)::

    <folder>/<key>.source    URL and version tag of the remote file (written first)
    <folder>/<key>.data      sparse: block i holds the remote bytes [i·B, (i + 1)·B)
    <folder>/<key>.log       (block index, crc32) uint32 pairs, appended after the data

A block counts as cached only once its log record is written, after its bytes; a block read
from an earlier run is checked against its CRC before its first use, and dropped when it does
not match. So a crash (or power loss) mid-write leaves at most a block that is fetched again,
never one served wrong; a torn last log record is ignored. Small blocks cost little: a fetched
range is one ``pwrite`` and one log append, and rows are copied out of a memory map of the data
file with one ``np.take`` per file, as from a local store.

The budget counts cached blocks; past it whole files go, least recently used first (by the data
file's mtime, touched on every use, so the order survives a restart), never one that a read in
progress has pinned. Processes that share a folder each keep their own count.
"""
import contextlib
import hashlib
import mmap
import os
import socket
import threading
import zlib
from collections import OrderedDict
from typing import Dict, Iterator, Optional

import numpy as np


def temp_name(path: str) -> str:
    """A temporary name beside ``path`` that says which process on which host writes it."""
    return f'{path}.tmp-{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}'


def _abandoned(name: str) -> bool:
    """Whether a temporary file was left by a process of this host that no longer runs (a
    crash mid-write). One of a live process — another reader sharing the folder — or of another
    host, or a name not written by :func:`temp_name`, is left alone."""
    host, sep, rest = name.rsplit('.tmp-', 1)[1].rpartition('-')[0].rpartition('-')
    if not sep or host != socket.gethostname() or not rest.isdigit():
        return False
    try:
        os.kill(int(rest), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, under another user
        return False
    return False


def file_key(url: str, version: str, size: int) -> str:
    return hashlib.sha1(f'{url}\n{version}\n{size}'.encode()).hexdigest()[:24]


class CachedFile:
    """The cache of one remote file: which blocks are there (``present``) and checked."""

    def __init__(self, path: str, size: int, block_size: int, log: Optional[np.ndarray]):
        self.size, self.block_size = size, block_size
        self.blocks = -(-size // block_size)
        self.present = np.zeros(self.blocks, bool)
        self.verified = np.zeros(self.blocks, bool)
        self.crc = np.zeros(self.blocks, np.uint32)
        if log is not None and len(log):
            valid = log[log[:, 0] < self.blocks]
            self.present[valid[:, 0]] = True
            self.crc[valid[:, 0]] = valid[:, 1]  # the last record of a block wins
        self.lock = threading.Lock()
        self.pins = 0
        self.fd = os.open(path + '.data', os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size != size:
            os.ftruncate(self.fd, size)  # full length, sparse: holes where nothing is cached
        self.log_fd = os.open(path + '.log', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # rows are copied out of a map of this very file (inode): another process evicting
        # the path cannot swap it under the map
        self.array = (np.frombuffer(mmap.mmap(self.fd, size, access=mmap.ACCESS_READ), np.uint8)
                      if size else np.zeros(0, np.uint8))

    def nbytes(self, first: int, stop: int) -> int:
        """Bytes of blocks [first, stop) (the last block of the file may be short)."""
        return min(stop * self.block_size, self.size) - first * self.block_size

    def cached_bytes(self) -> int:
        count = int(self.present.sum()) * self.block_size
        if self.blocks and self.present[-1]:
            count -= self.blocks * self.block_size - self.size
        return count

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.log_fd)


def _read_log(path: str) -> np.ndarray:
    raw = np.fromfile(path, np.uint32) if os.path.exists(path) else np.zeros(0, np.uint32)
    return raw[:len(raw) // 2 * 2].reshape(-1, 2).astype(np.int64)  # a torn last record: ignored


class BlockCache:
    """Files of blocks of ``block_size`` bytes under ``folder``, at most ``budget`` bytes."""

    def __init__(self, folder: str, budget: int, block_size: int):
        if block_size <= 0 or budget < 0:
            raise ValueError(f'block cache {folder}: block_size {block_size} and budget {budget} '
                             f'must be positive')
        self.folder, self.budget, self.block_size = folder, budget, block_size
        self._files: Dict[str, CachedFile] = {}
        self._waiting: Dict[str, int] = {}  # key -> cached bytes of files not opened yet
        self._recency: 'OrderedDict[str, None]' = OrderedDict()
        self._tags: Dict[str, str] = {}
        self.used = 0
        self._lock = threading.Lock()
        os.makedirs(folder, exist_ok=True)
        self._scan()

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key)

    def _scan(self) -> None:
        found = []
        for name in os.listdir(self.folder):
            if '.tmp-' in name:
                if _abandoned(name):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(self.folder, name))
            elif name.endswith('.log'):
                key = name[:-4]
                if not os.path.exists(self._path(key) + '.source'):
                    self._remove_files(key)  # blocks of no known version
                    continue
                log = _read_log(self._path(key) + '.log')
                nbytes = len(np.unique(log[:, 0])) * self.block_size
                try:
                    mtime = os.stat(self._path(key) + '.data').st_mtime_ns
                except FileNotFoundError:
                    self._remove_files(key)
                    continue
                found.append((mtime, key, nbytes))
        for _, key, nbytes in sorted(found):
            self._waiting[key] = nbytes
            self._recency[key] = None
            self.used += nbytes
        with self._lock:
            self._evict()

    # ------------------------------------------------------------------------ versions
    def version_tag(self, key: str) -> Optional[str]:
        """The version tag recorded for a file's blocks (None when it has none yet)."""
        with self._lock:
            if key not in self._tags:
                try:
                    with open(self._path(key) + '.source') as f:
                        self._tags[key] = f.read().split('\n')[1]
                except (FileNotFoundError, IndexError):
                    return None
            return self._tags[key]

    def record_version(self, key: str, url: str, tag: str) -> None:
        """Note the version tag of a file's blocks (before the first block is stored)."""
        with self._lock:
            if self._tags.get(key) == tag:
                return
            tmp = temp_name(self._path(key) + '.source')
            with open(tmp, 'w') as f:
                f.write(f'{url}\n{tag}\n')
            os.replace(tmp, self._path(key) + '.source')
            self._tags[key] = tag

    # ------------------------------------------------------------------------ files
    def file(self, key: str, size: int) -> CachedFile:
        """The cache of a remote file of ``size`` bytes (opened once)."""
        with self._lock:
            cached = self._files.get(key)
            if cached is None:
                log = _read_log(self._path(key) + '.log') if key in self._waiting else None
                self.used -= self._waiting.pop(key, 0)
                cached = self._files[key] = CachedFile(self._path(key), size, self.block_size,
                                                       log)
                self.used += cached.cached_bytes()
            self._recency[key] = None
            self._recency.move_to_end(key)
            return cached

    @contextlib.contextmanager
    def pinned(self, cached: CachedFile) -> Iterator[None]:
        """Keep a file from eviction while a read uses it; touch it (recency)."""
        with self._lock:
            cached.pins += 1
        try:
            yield
        finally:
            with self._lock:
                cached.pins -= 1
                self._evict()

    def verify(self, key: str, cached: CachedFile, blocks: np.ndarray) -> None:
        """Check the CRC of every present, not yet checked block among ``blocks`` (blocks of an
        earlier run); drop the ones that fail. Touches the file (recency)."""
        bs = self.block_size
        todo = blocks[cached.present[blocks] & ~cached.verified[blocks]]
        if len(todo):
            breaks = np.flatnonzero(np.diff(todo) > 1) + 1
            bad = []
            for run in np.split(todo, breaks):
                first, stop = int(run[0]), int(run[-1]) + 1
                with cached.lock:
                    data = os.pread(cached.fd, cached.nbytes(first, stop), first * bs) \
                        if cached.fd >= 0 else b''
                view = memoryview(data)
                for i in range(first, stop):
                    block = view[(i - first) * bs:(i - first + 1) * bs]
                    if len(block) != cached.nbytes(i, i + 1) or \
                            zlib.crc32(block) != int(cached.crc[i]):
                        bad.append(i)
            with self._lock:
                bad = np.array(bad, dtype=np.int64)
                self.used -= int(cached.present[bad].sum()) * bs
                cached.present[bad] = False
                cached.verified[todo] = True
                cached.verified[bad] = False
        try:
            os.utime(self._path(key) + '.data')
        except FileNotFoundError:
            pass

    def write(self, key: str, cached: CachedFile, first: int, data: bytes) -> None:
        """Store blocks from ``first`` on: bytes first, then their log records."""
        bs = self.block_size
        count = -(-len(data) // bs)
        view = memoryview(data)
        records = np.empty((count, 2), np.uint32)
        records[:, 0] = np.arange(first, first + count)
        records[:, 1] = [zlib.crc32(view[i * bs:(i + 1) * bs]) for i in range(count)]
        with cached.lock:
            if cached.fd < 0:
                return  # evicted while fetched
            os.pwrite(cached.fd, data, first * bs)
            os.write(cached.log_fd, records.tobytes())
        with self._lock:
            new = ~cached.present[first:first + count]
            cached.present[first:first + count] = True
            cached.verified[first:first + count] = True
            cached.crc[first:first + count] = records[:, 1]
            self.used += int(new.sum()) * bs
            self._evict()

    def discard_file(self, key: str) -> None:
        """Drop every block of a file (its version on the server is not the cached one)."""
        with self._lock:
            self._drop(key)
            self._tags.pop(key, None)

    def _drop(self, key: str) -> None:
        cached = self._files.pop(key, None)
        if cached is not None:
            with cached.lock:
                self.used -= cached.cached_bytes()
                cached.present[:] = False
                cached.close()
                cached.fd = cached.log_fd = -1
        self.used -= self._waiting.pop(key, 0)
        self._recency.pop(key, None)
        self._remove_files(key)

    def _remove_files(self, key: str) -> None:
        for suffix in ('.log', '.data', '.source'):  # the log first: no record without data
            try:
                os.remove(self._path(key) + suffix)
            except FileNotFoundError:
                pass

    def _evict(self) -> None:
        """Under the lock: whole files out, least recently used first, pinned ones kept."""
        for key in list(self._recency):
            if self.used <= self.budget:
                return
            cached = self._files.get(key)
            if cached is None or cached.pins == 0:
                self._drop(key)
