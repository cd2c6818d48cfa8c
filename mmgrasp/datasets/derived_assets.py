"""Atomic builds of derived assets (the label store, the frame store) in the cache folder.

A build writes into ``<folder>.tmp-<pid>`` and renames it into place under ``<folder>.lock``:
concurrent builders wait and then reuse the first one's result, a build that dies leaves only a
temporary folder (removed by the next build), and a reader never sees half a store.
"""
import fcntl
import glob
import json
import os
import shutil
import time
from typing import Callable, Optional, Type, TypeVar

from mmengine.logging import print_log

MANIFEST = 'manifest.json'
T = TypeVar('T')


def build_atomically(folder: str, what: str, error: Type[Exception],
                     reuse: Callable[[], Optional[T]], build_into: Callable[[str], dict],
                     opened: Callable[[dict], T]) -> T:
    """Build ``folder`` unless ``reuse()`` (called under the lock) returns a usable store.

    Args:
        folder: the asset's final path.
        what: its name in messages ("label store").
        error: exception raised when the cache cannot be written.
        reuse: the opened store when an up-to-date one exists (another builder may have
            finished while this one waited), else None.
        build_into: writes the asset's files into the temporary folder it is given and returns
            the manifest, written last as ``manifest.json``.
        opened: the store opened from the new manifest.
    """
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        lock = open(folder + '.lock', 'a')
    except OSError as exc:
        raise error(f'cannot write the {what} under {parent} ({exc.strerror}); set '
                    f'MMGRASP_CACHE (or --cache) to a writable folder, or build it elsewhere '
                    f'and copy it') from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        existing = reuse()
        if existing is not None:
            return existing
        for leftover in glob.glob(folder + '.tmp-*') + glob.glob(folder + '.old-*'):
            shutil.rmtree(leftover, ignore_errors=True)
        tmp, old, t0 = f'{folder}.tmp-{os.getpid()}', f'{folder}.old-{os.getpid()}', time.time()
        os.makedirs(tmp)
        try:
            manifest = build_into(tmp)
            with open(os.path.join(tmp, MANIFEST + '.tmp'), 'w') as f:
                json.dump(manifest, f, indent=1)
            os.rename(os.path.join(tmp, MANIFEST + '.tmp'), os.path.join(tmp, MANIFEST))
            if os.path.exists(folder):
                os.rename(folder, old)
            os.rename(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
        print_log(f'{what}: built {folder} in {time.time() - t0:.1f}s', logger='current')
        return opened(manifest)
