"""Derived assets (the label store, the frame store) in the cache folder: versioned, built
atomically beside the versions in use, and never pulled out from under a running job.

Layout of one asset folder::

    <folder>.lock               build lock (flock): one builder at a time
    <folder>/CURRENT            name of the current version, replaced by a rename
    <folder>/store-<hash>/      one complete version: its files, then manifest.json, written last
    <folder>/tmp-<pid>/         a build in progress (a dead builder's is removed by the next build)

A build writes a new version next to the others and then points ``CURRENT`` at it: a process that
opened an older version keeps reading the same files, unchanged, for as long as it runs. An opened
version is *held*: a shared ``flock`` on its manifest, taken when the store is opened and released
when the opened store object is freed (forked DataLoader workers inherit it). Every build removes
the versions that nobody holds; a version held by a job that keeps running stays on disk until a
build after that job ended. Concurrent builders wait on the lock and then reuse the first one's
result; a reader never sees half a version.
"""
import fcntl
import hashlib
import json
import os
import shutil
import time
from typing import Callable, Optional, Type, TypeVar

from mmengine.logging import print_log

MANIFEST = 'manifest.json'
CURRENT = 'CURRENT'
VERSION_PREFIX = 'store-'
T = TypeVar('T')
M = TypeVar('M')


class VersionHold:
    """A shared lock on a version's manifest: builds do not remove the version while it lives."""

    def __init__(self, version: str):
        self.version = version
        path = os.path.join(version, MANIFEST)
        self._file = open(path, 'rb')  # FileNotFoundError: the version is gone
        fcntl.flock(self._file, fcntl.LOCK_SH)
        if not os.path.exists(path):  # removed between the open and the lock
            self._file.close()
            raise FileNotFoundError(path)

    def __reduce__(self):  # a pickled store holds its version again where it is unpickled
        return VersionHold, (self.version,)


def current_version(folder: str) -> Optional[str]:
    """The folder of the current version, or None when the asset was never built."""
    try:
        with open(os.path.join(folder, CURRENT)) as f:
            name = f.read().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return os.path.join(folder, name) if name else None


def _hold(version: str) -> Optional[VersionHold]:
    try:
        return VersionHold(version)
    except FileNotFoundError:
        return None


def _remove_if_unused(version: str) -> bool:
    """Remove a version nobody holds (called under the build lock); False when in use."""
    try:
        manifest = open(os.path.join(version, MANIFEST), 'rb')
    except FileNotFoundError:  # never finished, or half removed
        shutil.rmtree(version, ignore_errors=True)
        return True
    with manifest:
        try:
            fcntl.flock(manifest, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(version, ignore_errors=True)
    return True


def _new_version_name(folder: str, manifest: dict) -> str:
    digest = hashlib.sha1(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:12]
    name, n = f'{VERSION_PREFIX}{digest}', 1
    while os.path.exists(os.path.join(folder, name)):  # a forced rebuild of the same sources
        n += 1
        name = f'{VERSION_PREFIX}{digest}-{n}'
    return name


def read_manifest(version: str, error: Type[Exception]) -> Optional[dict]:
    """The JSON manifest of an asset version (None when it has none); an unreadable one is
    ``error`` naming the file and how to recover."""
    path = os.path.join(version, MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise error(f'{path}: unreadable manifest ({exc}); delete {version} and '
                    f'rebuild') from exc


def save_array(path: str, array) -> None:
    """One ``.npy`` file of an asset being built (contiguous, never pickled)."""
    import numpy as np
    with open(path, 'wb') as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)


def open_or_build(folder: str, what: str, error: Type[Exception],
                  read: Callable[[str], Optional[M]], stale: Callable[[M], Optional[str]],
                  build_into: Callable[[str], dict], opened: Callable[[str, M, VersionHold], T],
                  build: bool = True, force: bool = False, rebuild_hint: str = '') -> T:
    """Open the current version of ``folder`` when it is up to date, else build a new one.

    Args:
        folder: the asset's folder.
        what: its name in messages ("label store").
        error: exception raised when the asset cannot be used or the cache cannot be written.
        read: what a version's manifest says (None when it has none).
        stale: why what ``read`` returned may not be used (None when it may).
        build_into: writes the asset's files into the temporary folder it is given and returns
            the manifest, written last as ``manifest.json``.
        opened: the store opened from a version, what ``read`` returned and its hold.
        build: build when missing or stale (else raise ``error`` with ``rebuild_hint``).
        force: build a new version even when the current one is up to date.
    """
    reason = 'a rebuild was asked for (force)'
    if not force:
        version = current_version(folder)
        found = read(version) if version is not None else None
        reason = 'it does not exist' if found is None else stale(found)
        hold = _hold(version) if reason is None else None
        if hold is not None:
            return opened(version, found, hold)
        reason = reason or 'it was replaced while being opened'
        if not build:
            raise error(f'{what} {folder} cannot be used: {reason}. {rebuild_hint}')
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        lock = open(folder + '.lock', 'a')
    except OSError as exc:
        raise error(f'cannot write the {what} under {parent} ({exc.strerror}); set '
                    f'MMGRASP_CACHE (or --cache) to a writable folder, or build it elsewhere '
                    f'and copy it') from exc
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process (a DDP rank, another job) is building it
            print_log(f'{what} {folder}: another process is building it; waiting for it',
                      logger='current')
            fcntl.flock(lock, fcntl.LOCK_EX)
        version = current_version(folder)
        if not force and version is not None:  # another builder may have finished meanwhile
            found = read(version)
            if found is not None and stale(found) is None:
                return opened(version, found, VersionHold(version))
        # said once, by the process that builds (the others waited above)
        print_log(f'{what} {folder}: {reason}; building it', logger='current')
        return _build(folder, what, read, build_into, opened)


def _folder_size_text(folder: str) -> str:
    """The bytes of the files under ``folder``, as MiB or GiB."""
    size = sum(os.path.getsize(os.path.join(parent, name))
               for parent, _, names in os.walk(folder) for name in names)
    return f'{size / 2 ** 30:.2f} GiB' if size >= 2 ** 30 else f'{size / 2 ** 20:.1f} MiB'


def _build(folder: str, what: str, read: Callable[[str], Optional[M]],
           build_into: Callable[[str], dict],
           opened: Callable[[str, M, VersionHold], T]) -> T:
    """Build a new version and make it current (under the build lock)."""
    os.makedirs(folder, exist_ok=True)
    for entry in os.listdir(folder):  # left by builds that died
        if entry.startswith('tmp-'):
            shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
        elif entry.startswith(CURRENT + '.tmp-'):
            os.remove(os.path.join(folder, entry))
    tmp, t0 = os.path.join(folder, f'tmp-{os.getpid()}'), time.time()
    os.makedirs(tmp)
    try:
        manifest = build_into(tmp)
        with open(os.path.join(tmp, MANIFEST + '.tmp'), 'w') as f:
            json.dump(manifest, f, indent=1)
        os.rename(os.path.join(tmp, MANIFEST + '.tmp'), os.path.join(tmp, MANIFEST))
        version = os.path.join(folder, _new_version_name(folder, manifest))
        os.rename(tmp, version)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    hold = VersionHold(version)
    pointer = os.path.join(folder, f'{CURRENT}.tmp-{os.getpid()}')
    with open(pointer, 'w') as f:
        f.write(os.path.basename(version) + '\n')
    os.rename(pointer, os.path.join(folder, CURRENT))
    kept = [entry for entry in sorted(os.listdir(folder))
            if entry.startswith(VERSION_PREFIX) and os.path.join(folder, entry) != version
            and not _remove_if_unused(os.path.join(folder, entry))]
    print_log(f'{what}: built {version} ({_folder_size_text(version)}) in '
              f'{time.time() - t0:.1f}s'
              + (f'; kept {len(kept)} older version(s) still in use' if kept else ''),
              logger='current')
    return opened(version, read(version), hold)
