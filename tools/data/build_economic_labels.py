#!/usr/bin/env python
"""Build EconomicGrasp's compact labels of a dataset root ahead of training.

They are derived from the label store (built first when missing or stale) with the rules of
EconomicGrasp's ``dataset/generate_economic.py`` (see ``mmgrasp/storage/labels/economic.py``);
training builds them lazily on first use otherwise.

Usage:
    python tools/data/build_economic_labels.py DATA_ROOT [--cache DIR] [--top-k 300]
        [--float] [--view-dtype uint16|int32] [--force]
"""
import argparse
import os
import sys
import time
from typing import List, Optional

from mmgrasp.datasets.graspnet_reader import DatasetFileError
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels.economic import VIEW_DTYPES
from mmgrasp.storage.labels.economic_store import open_economic_labels
from mmgrasp.storage.labels.store import LabelStoreError, open_label_store


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', metavar='DATA_ROOT')
    p.add_argument('--cache', default=None, help='default $MMGRASP_CACHE or ~/.cache/mmgrasp')
    p.add_argument('--top-k', type=int, default=300, help='views kept per label point')
    p.add_argument('--float', action='store_true',
                   help='keep scores and widths in float32 instead of the reference uint8')
    p.add_argument('--view-dtype', choices=VIEW_DTYPES, default='uint16')
    p.add_argument('--force', action='store_true', help='rebuild even when current')
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not os.path.isdir(args.root):
        sys.exit(f'build_economic_labels: error: {os.path.abspath(args.root)} is not a directory')
    t0 = time.perf_counter()
    try:
        store = open_label_store(open_reader(args.root), args.cache, build=True)
        t1 = time.perf_counter()
        labels = open_economic_labels(store, args.top_k, not args.float, args.view_dtype,
                                      force=args.force)
    except (DatasetFileError, LabelStoreError, ValueError) as exc:
        sys.exit(f'build_economic_labels: error: {exc}')
    t2 = time.perf_counter()
    size = sum(os.path.getsize(os.path.join(d, n))
               for d, _, names in os.walk(labels.path) for n in names)
    rows = sum(s.instance_offsets[-1] for s in labels.scenes.values())
    print(f'economic labels: {labels.path}')
    print(f'scenes: {len(labels.scenes)}  kept points: {rows}  top-k: {labels.top_k}  '
          f'{"uint8" if labels.quantize else "float32"} scores/widths')
    print(f'label store {t1 - t0:.2f} s, economic labels {t2 - t1:.2f} s; '
          f'{size / 2 ** 20:.2f} MiB on disk')


if __name__ == '__main__':
    main()
