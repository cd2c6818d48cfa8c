"""Fixed-size blocks of remote files on local disk: a byte budget, least recently used out,
kept across restarts, never a half-written block.

Layout::

    <folder>/<file key>/source      URL and version tag of the file (for people; checked on open)
    <folder>/<file key>/<index>     block ``index``: bytes [index·B, (index + 1)·B) of the file

A file key hashes the URL, the store version and the file's size, so blocks of two versions of
a store never share a folder. A block is written to a temporary name and renamed: a block that
exists is whole (a crash leaves at most a ``*.tmp-*`` file, removed at the next open). Its size
is checked on every read against what the file's geometry says. Recency is the block file's
mtime (touched on every hit), so the least-recently-used order survives a restart; the budget
is kept by this process (processes sharing a folder each keep their own count, and a block
another one evicted is simply fetched again).
"""
import hashlib
import os
import shutil
import threading
from collections import OrderedDict
from typing import Dict, Optional, Tuple

_TMP = '.tmp-'


def file_key(url: str, version: str, size: int) -> str:
    return hashlib.sha1(f'{url}\n{version}\n{size}'.encode()).hexdigest()[:24]


class BlockCache:
    """Blocks of ``block_size`` bytes under ``folder``, at most ``budget`` bytes in all."""

    def __init__(self, folder: str, budget: int, block_size: int):
        if block_size <= 0 or budget < 0:
            raise ValueError(f'block cache {folder}: block_size {block_size} and budget {budget} '
                             f'must be positive')
        self.folder, self.budget, self.block_size = folder, budget, block_size
        self._lru: 'OrderedDict[Tuple[str, int], int]' = OrderedDict()
        self._tags: Dict[str, str] = {}
        self.used = 0
        self._lock = threading.Lock()
        os.makedirs(folder, exist_ok=True)
        self._scan()

    def _scan(self) -> None:
        found = []
        for key in os.listdir(self.folder):
            sub = os.path.join(self.folder, key)
            if not os.path.isdir(sub):
                continue
            if not os.path.isfile(os.path.join(sub, 'source')):  # blocks of no known version
                shutil.rmtree(sub, ignore_errors=True)
                continue
            for entry in os.scandir(sub):
                if _TMP in entry.name:
                    os.remove(entry.path)  # left by a crash mid-write
                elif entry.name.isdigit():
                    st = entry.stat()
                    found.append((st.st_mtime_ns, key, int(entry.name), st.st_size))
        for _, key, index, size in sorted(found):
            self._lru[(key, index)] = size
            self.used += size
        self._evict()

    def _path(self, key: str, index: int) -> str:
        return os.path.join(self.folder, key, str(index))

    def version_tag(self, key: str) -> Optional[str]:
        """The version tag recorded for a file's blocks (None when it has none yet)."""
        with self._lock:
            if key not in self._tags:
                try:
                    with open(os.path.join(self.folder, key, 'source')) as f:
                        self._tags[key] = f.read().split('\n')[1]
                except (FileNotFoundError, IndexError):
                    return None
            return self._tags[key]

    def record_version(self, key: str, url: str, tag: str) -> None:
        """Note the version tag of a file's blocks (before the first block is stored)."""
        with self._lock:
            if self._tags.get(key) == tag:
                return
            folder = os.path.join(self.folder, key)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f'source{_TMP}{os.getpid()}-{threading.get_ident()}')
            with open(tmp, 'w') as f:
                f.write(f'{url}\n{tag}\n')
            os.replace(tmp, os.path.join(folder, 'source'))
            self._tags[key] = tag

    def get(self, key: str, index: int, nbytes: int) -> Optional[bytes]:
        """Block ``index`` of a file when cached and ``nbytes`` long, else None."""
        path = self._path(key, index)
        try:
            with open(path, 'rb') as f:
                data = f.read()
        except FileNotFoundError:
            with self._lock:
                self._forget(key, index)
            return None
        if len(data) != nbytes:  # not written by this cache: never served
            self._remove(key, index)
            return None
        try:
            os.utime(path)
        except FileNotFoundError:
            pass
        with self._lock:
            if (key, index) in self._lru:
                self._lru.move_to_end((key, index))
            else:
                self._lru[(key, index)] = nbytes
                self.used += nbytes
        return data

    def put(self, key: str, index: int, data: bytes) -> None:
        """Store a block (temporary name, then rename) and evict down to the budget."""
        if len(data) > self.budget:
            return
        path = self._path(key, index)
        tmp = f'{path}{_TMP}{os.getpid()}-{threading.get_ident()}'
        with open(tmp, 'wb') as f:
            f.write(data)
        os.replace(tmp, path)
        with self._lock:
            self._forget(key, index)
            self._lru[(key, index)] = len(data)
            self.used += len(data)
            self._evict()

    def contains(self, key: str, index: int) -> bool:
        with self._lock:
            return (key, index) in self._lru

    def discard_file(self, key: str) -> None:
        """Drop every block of a file (its version on the server is not the cached one)."""
        with self._lock:
            for item in [item for item in self._lru if item[0] == key]:
                self.used -= self._lru.pop(item)
            self._tags.pop(key, None)
            shutil.rmtree(os.path.join(self.folder, key), ignore_errors=True)

    def _forget(self, key: str, index: int) -> None:
        size = self._lru.pop((key, index), None)
        if size is not None:
            self.used -= size

    def _remove(self, key: str, index: int) -> None:
        with self._lock:
            self._forget(key, index)
        try:
            os.remove(self._path(key, index))
        except FileNotFoundError:
            pass

    def _evict(self) -> None:
        while self.used > self.budget and self._lru:
            (key, index), size = self._lru.popitem(last=False)
            self.used -= size
            try:
                os.remove(self._path(key, index))
            except FileNotFoundError:
                pass
