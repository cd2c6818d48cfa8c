#!/usr/bin/env python
"""Build the frame store (and, with ``--images``, the image store) of a dataset root ahead of
training.

Training and testing build them on first use: ``LoadGraspScene`` (the frame store, every shipped
config) and ``LoadRGBDImage`` (the image store, image methods) open them in the main process
before the loader workers fork. Building them here once keeps the decoding of every frame out of
the first run. The frame store is made for the recipes' mask (depth > 0 and the workspace box,
outlier 0.02 m) and the default graspness folder; other settings get their own store on first
use. Works on GraspNet-1Billion and GraspClutter6D roots.

Usage:
    python tools/data/build_frame_store.py DATA_ROOT [--camera CAMERA ...] [--images]
        [--workers N] [--cache DIR] [--force]

Without ``--force`` an up-to-date store is only opened and reported; a missing or stale one is
built. ``--camera`` defaults to every camera with scenes under DATA_ROOT; ``--cache`` to
``$MMGRASP_CACHE`` (else ``~/.cache/mmgrasp``); ``--workers`` to one process for fewer than 64
frames and up to 8 CPUs beyond. ``--images`` builds the image store too (whole RGB and depth
images, ~4.6 MB a 1280x720 frame). Graspness files (tools/data/generate_graspness.py) should
exist first: the frame store copies them, and is rebuilt when they appear later.
"""
import argparse
import os
import sys
import time
from typing import List, Optional

import numpy as np

from mmgrasp.storage.frames.images import open_image_store
from mmgrasp.storage.frames.store import FrameStoreError, camera_scenes, open_frame_store
from mmgrasp.datasets.graspnet_reader import DatasetFileError
from mmgrasp.datasets.layouts import open_reader


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', metavar='DATA_ROOT', help='dataset root (holds scenes/)')
    p.add_argument('--camera', nargs='+', default=None,
                   help='cameras to build (default: every camera with scenes)')
    p.add_argument('--cache', default=None, help='folder holding the stores '
                                                 '(default $MMGRASP_CACHE or ~/.cache/mmgrasp)')
    p.add_argument('--force', action='store_true', help='rebuild even when the store is current')
    p.add_argument('--images', action='store_true',
                   help='also build the image store (whole RGB and depth images)')
    p.add_argument('--workers', type=int, default=None,
                   help='processes decoding frames (default: 1 below 64 frames, else up to 8)')
    return p.parse_args(argv)


def mib(nbytes: int) -> str:
    return f'{nbytes / 2 ** 20:.1f} MiB'


def stored_bytes(store) -> int:
    return sum(os.path.getsize(os.path.join(store.path, name)) for name in os.listdir(store.path))


def report(store, elapsed: float) -> None:
    """Store size on disk against the files it replaces (sizes recorded in its fingerprints)."""
    stored = stored_bytes(store)
    sizes = np.load(os.path.join(store.path, 'fingerprints.npy'))[:, :, 0]
    images = int(sizes[:, :3].sum())
    graspness = int(sizes[:, 3].clip(min=0).sum())
    with_graspness = np.count_nonzero(np.diff(store.graspness_offsets))
    print(f'frame store: {store.path}')
    print(f'frames: {len(store)}  masked points: {store.manifest["num_points"]}  '
          f'with graspness: {with_graspness}  ({elapsed:.2f} s)')
    print(f'on disk: {mib(stored)}; sources: depth/label PNG + meta MAT {mib(images)}, '
          f'graspness {mib(graspness)} -> {stored / max(images + graspness, 1):.2f}x the sources')


def report_images(store, elapsed: float) -> None:
    stored = stored_bytes(store)
    sources = int(np.load(os.path.join(store.path, 'fingerprints.npy'))[:, :2, 0].sum())
    print(f'image store: {store.path}')
    print(f'frames: {len(store)}  images: {store.manifest["width"]}x{store.manifest["height"]}  '
          f'({elapsed:.2f} s)')
    print(f'on disk: {mib(stored)} ({stored / len(store) / 1e6:.2f} MB a frame); sources: '
          f'rgb/depth PNG {mib(sources)}')


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not os.path.isdir(args.root):
        sys.exit(f'build_frame_store: error: dataset root {os.path.abspath(args.root)} is not a '
                 f'directory')
    try:
        cameras = args.camera or open_reader(args.root).cameras
        readers = [open_reader(args.root, camera) for camera in cameras]
        readers = [r for r in readers if args.camera or camera_scenes(r)]
        for reader in readers:
            t0 = time.perf_counter()
            report(open_frame_store(reader, cache_dir=args.cache, force=args.force,
                                    workers=args.workers), time.perf_counter() - t0)
            if args.images:
                t0 = time.perf_counter()
                report_images(open_image_store(reader, args.cache, force=args.force,
                                               workers=args.workers), time.perf_counter() - t0)
    except (DatasetFileError, FrameStoreError, ValueError) as exc:
        sys.exit('\n'.join([f'build_frame_store: error: {exc}', *getattr(exc, '__notes__', [])]))


if __name__ == '__main__':
    main()
