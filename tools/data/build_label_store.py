#!/usr/bin/env python
"""Build the label store of a GraspNet-1Billion root ahead of training.

Training builds the store lazily on first use; building it here once keeps that minutes-long
conversion out of the first iteration (and out of every worker that would wait on the lock).

Usage:
    python tools/data/build_label_store.py DATA_ROOT [--cache DIR] [--tolerance-dir DIR] [--force]
        [--skip-missing-collision] [--upload URL [--storage-option KEY=VALUE ...]]

Without ``--force`` an up-to-date store is only opened and reported; a missing or stale one is
built. ``--cache`` defaults to ``$MMGRASP_CACHE`` (else ``~/.cache/mmgrasp``).

A scene on disk whose collision label file is missing stops the build naming that file;
``--skip-missing-collision`` leaves such scenes out instead, names each, and records them in the
manifest, so that training refuses their frames naming the missing file.

``--upload URL`` then publishes the store for training elsewhere (``SampleGraspLabels(
store_url=URL)``): to an object store obstore writes (``s3://``, ``gs://``, ``az://``) or
``file://`` of a shared file system, as ``URL/<version>/`` — every file, then its manifest (with
each file's ETag), then ``URL/CURRENT`` — so a half-uploaded store is never used, and jobs
reading an older version keep it. ``--storage-option KEY=VALUE`` (repeatable) sets the store's
non-secret configuration (``endpoint=http://…``, ``region=…``, ``virtual_hosted_style_request=
true``), the ``storage_options`` a training passes in ``SampleGraspLabels(remote=...)``;
credentials come from the environment or the library's credential chain only (``AWS_*`` …), and
a secret-looking key is refused.
"""
import argparse
import os
import sys
import time
from typing import List, Optional

from mmgrasp.datasets.graspnet_reader import DatasetFileError
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.derived_assets import current_version
from mmgrasp.storage.labels.store import (MANIFEST, LabelStoreError, build_label_store,
                                          open_label_store, store_path_for)
from mmgrasp.storage import publish_store
from mmgrasp.storage.secrets import secret_paths


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', metavar='DATA_ROOT', help='dataset root (holds scenes/, grasp_label/, '
                                                     'collision_label/)')
    p.add_argument('--cache', default=None, help='folder holding label stores '
                                                 '(default $MMGRASP_CACHE or ~/.cache/mmgrasp)')
    p.add_argument('--tolerance-dir', default=None,
                   help='folder of %%03d_tolerance.npy files (default DATA_ROOT/tolerance)')
    p.add_argument('--force', action='store_true', help='rebuild even when the store is current')
    p.add_argument('--skip-missing-collision', action='store_true',
                   help='leave scenes without a collision label file out of the store (named, '
                        'recorded in its manifest; training refuses their frames) instead of '
                        'stopping')
    p.add_argument('--upload', metavar='URL', default=None,
                   help='publish the store at this URL (s3://, gs://, az://, file://)')
    p.add_argument('--storage-option', metavar='KEY=VALUE', action='append', default=[],
                   help='a non-secret option of the object store (endpoint, region, ...); '
                        'repeatable; credentials come from the environment')
    return p.parse_args(argv)


def storage_options(pairs: List[str]) -> dict:
    """``['endpoint=http://h:9000']`` -> ``{'endpoint': 'http://h:9000'}``; refuses a pair
    without ``=`` and a secret-looking key (it would sit in shell history and job logs)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition('=')
        if not sep or not key:
            raise ValueError(f'--storage-option {pair!r}: expected KEY=VALUE')
        options[key.strip()] = value
    secret = secret_paths(dict(storage_options=options))
    if secret:
        raise ValueError(f'--storage-option {", ".join(s.split(".", 1)[1] for s in secret)} looks '
                         f'like a credential (a secret or unknown obstore configuration key, see '
                         f'mmgrasp.storage.secrets); credentials come from the environment (AWS_*, '
                         f'GOOGLE_*, AZURE_*) or the library\'s credential chain')
    return options


def human_size(nbytes: int) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    if nbytes < 1024:
        return f'{nbytes} B'
    size = nbytes / 1024
    for unit in ('KiB', 'MiB'):
        if size < 1024:
            return f'{size:.1f} {unit}'
        size /= 1024
    return f'{size:.1f} GiB'


def disk_size(folder: str) -> int:
    """Sum of the sizes of the files under ``folder``."""
    return sum(os.path.getsize(os.path.join(d, name))
               for d, _, names in os.walk(folder) for name in names)


def _manifest_stamp(version: Optional[str]) -> Optional[tuple]:
    """Version folder and mtime of its manifest, or None: a new stamp after the call means the
    store was built."""
    try:
        return version, os.stat(os.path.join(version, MANIFEST)).st_mtime_ns
    except (FileNotFoundError, TypeError):
        return None


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not os.path.isdir(args.root):
        sys.exit(f'build_label_store: error: dataset root {os.path.abspath(args.root)} is not a '
                 f'directory')
    path = store_path_for(args.root, args.cache, args.tolerance_dir)
    before = _manifest_stamp(current_version(path))
    t0 = time.perf_counter()
    try:
        reader = open_reader(args.root, tolerance_dir=args.tolerance_dir)
        if args.force:
            store = build_label_store(reader, args.cache, force=True,
                                      skip_missing_collision=args.skip_missing_collision)
        else:
            store = open_label_store(reader, args.cache, build=True,
                                     skip_missing_collision=args.skip_missing_collision)
    except (DatasetFileError, LabelStoreError) as exc:
        sys.exit(f'build_label_store: error: {exc}')
    elapsed = time.perf_counter() - t0
    built = before is None or _manifest_stamp(store.path) != before
    print(f'label store: {store.path}')
    print(f'objects: {len(store.objects)}  scenes: {len(store.scenes)}  '
          f'grid (V, A, D): {store.grid}')
    for scene, path in sorted(store.skipped_scenes.items()):
        print(f'skipped scene {scene}: collision label file {path} is missing (its training '
              f'frames are refused)')
    print(f'{"built" if built else "up to date, opened"} in {elapsed:.2f} s; '
          f'{human_size(disk_size(store.path))} on disk')
    if args.upload:
        t0 = time.perf_counter()
        try:
            target = publish_store(store.path, args.upload,
                                   storage_options(args.storage_option),
                                   progress=lambda line: print(f'upload: {line}', flush=True))
        except (OSError, ImportError, ValueError) as exc:
            sys.exit(f'build_label_store: error: upload to {args.upload} failed: {exc}')
        print(f'published {target} in {time.perf_counter() - t0:.2f} s '
              f'(SampleGraspLabels(store_url={args.upload!r}))')


if __name__ == '__main__':
    main()
