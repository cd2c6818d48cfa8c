#!/usr/bin/env python
"""Where a training iteration spends its time, dense against deferred label grids, in one run.

    python tools/analysis/benchmark_loader.py CONFIG [--grids dense deferred] [--scenes N]
        [--iterations 30] [--warmup 3] [--repeats 3] [--workers N] [--cold] [--model-scale S]
        [--source files frames] [--transforms N] [--loader-only]
        [--json OUT] [--cfg-options KEY=VALUE ...]

Runs the config's real training pipeline, data loader, model and optimizer on the config's
dataset (the first N scenes of its split). In every repeat the storages run back to back on the
same frames, the same sampling and the same initial weights. Each run measures

- the loader alone: time to the first batch (fresh workers), frames/s, and the bytes of a batch
  as it leaves a worker (every tensor's bytes plus the pickled rest);
- training iterations: the wait for the loader, ``batch.to(device)`` (the data preprocessor),
  the forward pass and inside it the model's parts (backbone, seed selection, view stage,
  assigner — where deferred grids are read —, grouper, head, losses), backward, the optimizer
  step and the whole iteration (means over the measured iterations).

The table gives "best / median" over the repeats. On CUDA the device is synchronised around each
part. ``--cold`` evicts the label store's files from the page cache before every run
(POSIX_FADV_DONTNEED), so the read-ahead can be measured. ``--model-scale`` multiplies the
network's channel widths (never the data) for CPUs too slow to run the paper-size network.

``--source files frames`` also runs each storage with ``LoadGraspScene(source=...)`` set to each
source (PNG/MAT files, or the frame store), back to back, and gives the frames/files ratios.
``--transforms N`` times each pipeline transform over N samples, in this process and
single-threaded like a loader worker (mmdet's DatasetBenchmark), one sample part by part.
``--loader-only`` skips the training iterations (no model is built).
"""
import argparse
import copy
import io
import json
import os
import pickle
import statistics
import sys
import time
from typing import Dict, Iterator, List

import torch
from mmengine.config import Config, DictAction
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.registry import DATASETS, MODELS
from mmgrasp.storage.labels import maps as label_maps
from mmgrasp.storage.readers import pop_map_copy_bytes, pop_map_copy_seconds
from mmgrasp.storage.labels.store import open_label_store

PARTS = ('backbone', 'seed_selection', 'view', 'assigner', 'grouper', 'head', 'losses')
ROWS = [('loader_fps', 'loader frames/s', 1), ('batch_mib', 'batch leaving a worker (MiB)', 1),
        ('first_batch_s', 'time to the first batch (s)', 1),
        ('to_device_ms', 'batch.to(device) (ms)', 1), ('forward_ms', 'forward (ms)', 1)] + \
       [(f'{p}_ms', f'  {p.replace("_", " ")} (ms)', 1) for p in PARTS] + \
       [('map_copy_ms', '    of the assigner: copy out of the memory maps (ms)', 1),
        ('map_copy_mib', '    bytes copied out of the memory maps per batch (MiB)', 1),
        ('backward_ms', 'backward (ms)', 1), ('optimizer_ms', 'optimizer step (ms)', 1),
        ('iteration_ms', 'iteration (ms)', 1), ('wait_ms', '  of it: wait for the loader (ms)', 1)]
HIGHER_IS_BETTER = {'loader_fps'}


def log(message: str) -> None:
    print(f'[benchmark_loader] {message}', file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config')
    p.add_argument('--grids', nargs='+', default=['dense', 'deferred'],
                   choices=['dense', 'deferred'])
    p.add_argument('--scenes', type=int, default=None, help='first N scenes of the split')
    p.add_argument('--iterations', type=int, default=30, help='measured iterations per run')
    p.add_argument('--warmup', type=int, default=3, help='unmeasured iterations first')
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--workers', type=int, default=None, help='loader workers (default: config)')
    p.add_argument('--cold', action='store_true', help='evict the label store before each run')
    p.add_argument('--model-scale', type=float, default=1.0,
                   help='multiply the network channel widths (not the data)')
    p.add_argument('--source', nargs='+', default=['files'], choices=['files', 'frames'],
                   help="LoadGraspScene's source: the dataset files and/or the frame store")
    p.add_argument('--transforms', type=int, default=0, metavar='N',
                   help='time each pipeline transform over N samples (0: off)')
    p.add_argument('--loader-only', action='store_true', help='skip the training iterations')
    p.add_argument('--json', help='write every figure to this file')
    p.add_argument('--cfg-options', nargs='+', action=DictAction, default={})
    return p.parse_args(argv)


def storage_config(cfg: Config, grids: str, args: argparse.Namespace) -> Config:
    cfg = copy.deepcopy(cfg)
    loader = cfg.train_dataloader
    found = [t for t in loader.dataset.pipeline
             if t['type'] in ('SampleGraspLabels', 'LoadEconomicLabels')]
    if not found:
        raise SystemExit(f'{args.config}: the train pipeline has no SampleGraspLabels or '
                         f'LoadEconomicLabels')
    for t in found:
        t['grids'] = grids
    if args.scenes is not None:
        loader.dataset.scenes = args.scenes
    if args.workers is not None:
        loader.num_workers = args.workers
    loader.persistent_workers = loader.num_workers > 0
    return cfg


def source_config(cfg: Config, source: str, args: argparse.Namespace) -> Config:
    """Set LoadGraspScene's source (``cfg`` is a copy made by :func:`storage_config`)."""
    found = [t for t in cfg.train_dataloader.dataset.pipeline if t['type'] == 'LoadGraspScene']
    if not found:
        raise SystemExit(f'{args.config}: the train pipeline has no LoadGraspScene')
    for t in found:
        t['source'] = source
    return cfg


def run_name(grids: str, source: str, args: argparse.Namespace) -> str:
    return grids if len(args.source) == 1 else f'{grids}, {source}'


class TimedTransform:
    """A pipeline transform that adds up the time of its calls."""

    def __init__(self, transform, name: str):
        self.transform, self.__name__, self.seconds = transform, name, 0.0

    def __call__(self, results: dict) -> dict:
        start = time.perf_counter()
        out = self.transform(results)
        self.seconds += time.perf_counter() - start
        return out


def time_transforms(cfg: Config, args: argparse.Namespace) -> Dict[str, float]:
    """Milliseconds per sample of each transform and of the whole sample, over
    ``args.transforms`` samples after one warm-up sample (stores opened, maps made)."""
    dataset = DATASETS.build(copy.deepcopy(cfg.train_dataloader.dataset))
    names = [type(t).__name__ for t in dataset.pipeline.transforms]
    timed = [TimedTransform(t, name if names.count(name) == 1 else f'{name}[{i}]')
             for i, (t, name) in enumerate(zip(dataset.pipeline.transforms, names))]
    dataset.pipeline.transforms = timed
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a DataLoader worker
    try:
        dataset[(0, 0)]
        for t in timed:
            t.seconds = 0.0
        start = time.perf_counter()
        for i in range(args.transforms):
            dataset[(1 + i // len(dataset), i % len(dataset))]
        total = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    out = {t.__name__: t.seconds * 1e3 / args.transforms for t in timed}
    out['one sample'] = total * 1e3 / args.transforms
    return out


def scale_network(model_cfg: dict, scale: float) -> dict:
    """Multiply every channel list of the backbone and crop (the data is untouched)."""
    if scale == 1.0:
        return model_cfg
    model_cfg = copy.deepcopy(model_cfg)
    for key in ('backbone', 'crop'):
        part = model_cfg.get(key) or {}
        if 'channels' in part:
            part['channels'] = tuple(max(4, int(round(c * scale))) for c in part['channels'])
        if 'out_channels' in part:
            part['out_channels'] = max(4, int(round(part['out_channels'] * scale)))
    return model_cfg


def batch_bytes(batch) -> int:
    """Bytes of a batch leaving a worker: every tensor's storage plus the pickled rest."""
    total = 0

    class Counter(pickle.Pickler):
        def persistent_id(self, obj):
            nonlocal total
            if isinstance(obj, torch.Tensor):
                total += obj.untyped_storage().nbytes()
                return ('tensor', id(obj))
            return None

    buffer = io.BytesIO()
    Counter(buffer, protocol=5).dump(batch)
    return total + buffer.tell()


def evict(store_path: str) -> None:
    label_maps._forget_parent_maps()  # drop this process's maps, so their pages can go
    for folder, _, files in os.walk(store_path):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def epochs(loader) -> Iterator:
    epoch = 0
    while True:
        if hasattr(loader.sampler, 'set_epoch'):
            loader.sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_storage(cfg: Config, args: argparse.Namespace, device: torch.device) -> Dict[str, float]:
    seed = cfg.get('randomness', {}).get('seed', 0) or 0
    loader = Runner.build_dataloader(cfg.train_dataloader, seed=seed)
    total = args.warmup + args.iterations
    start = time.perf_counter()
    batches = epochs(loader)
    first = next(batches)
    out = dict(first_batch_s=time.perf_counter() - start, batch_mib=batch_bytes(first) / 2 ** 20)
    for _ in range(args.warmup - 1):
        next(batches)
    frames, start = 0, time.perf_counter()
    for _ in range(args.iterations):
        frames += len(next(batches)['data_samples'])
    out['loader_fps'] = frames / (time.perf_counter() - start)
    del batches, loader, first
    if args.loader_only:
        return out

    torch.manual_seed(seed)
    model = MODELS.build(scale_network(cfg.model, args.model_scale)).to(device)
    model.timer.synchronize = True
    model.train()
    optim = build_optim_wrapper(model, copy.deepcopy(cfg.optim_wrapper))
    loader = Runner.build_dataloader(cfg.train_dataloader, seed=seed)
    batches = epochs(loader)
    sums: Dict[str, float] = {}
    for i in range(total):
        t0 = time.perf_counter()
        batch = next(batches)
        t1 = time.perf_counter()
        data = model.data_preprocessor(batch, True)
        sync()
        t2 = time.perf_counter()
        model.timer.pop()
        pop_map_copy_seconds(), pop_map_copy_bytes()
        losses = model(**data, mode='loss')
        sync()
        t3 = time.perf_counter()
        parts = model.timer.pop()
        map_copy, map_bytes = pop_map_copy_seconds(), pop_map_copy_bytes()
        optim.zero_grad()
        sum(v for k, v in losses.items() if 'loss' in k).backward()
        sync()
        t4 = time.perf_counter()
        optim.step()
        sync()
        t5 = time.perf_counter()
        if i < args.warmup:
            continue
        times = dict(wait_ms=t1 - t0, to_device_ms=t2 - t1, forward_ms=t3 - t2,
                     backward_ms=t4 - t3, optimizer_ms=t5 - t4, iteration_ms=t5 - t0,
                     map_copy_ms=map_copy,
                     **{f'{p}_ms': parts.get(p, 0.0) for p in PARTS})
        for key, value in times.items():
            sums[key] = sums.get(key, 0.0) + value * 1e3 / args.iterations
        sums['map_copy_mib'] = sums.get('map_copy_mib', 0.0) + map_bytes / 2 ** 20 \
            / args.iterations
    out.update(sums)
    return out


def table(results: Dict[str, List[Dict[str, float]]]) -> str:
    storages = list(results)
    lines = ['| figure | ' + ' | '.join(storages) + ' |',
             '|---|' + '---|' * len(storages)]
    for key, label, _ in ROWS:
        if key not in results[storages[0]][0]:
            continue  # --loader-only
        cells = []
        for storage in storages:
            values = [r[key] for r in results[storage]]
            best = max(values) if key in HIGHER_IS_BETTER else min(values)
            cells.append(f'{best:.3g} / {statistics.median(values):.3g}')
        lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def ratios(results: Dict[str, List[Dict[str, float]]]) -> Dict[str, float]:
    if not {'dense', 'deferred'} <= set(results):
        return {}

    def median(storage, key):
        return statistics.median(r[key] for r in results[storage])

    return dict(
        bytes_dense_over_deferred=median('dense', 'batch_mib') / median('deferred', 'batch_mib'),
        loader_fps_deferred_over_dense=median('deferred', 'loader_fps') / median('dense',
                                                                                 'loader_fps'),
        first_batch_deferred_over_dense=median('deferred', 'first_batch_s') / median(
            'dense', 'first_batch_s'),
        iteration_deferred_over_dense=median('deferred', 'iteration_ms') / median(
            'dense', 'iteration_ms'))


def transform_table(results: Dict[str, List[Dict[str, float]]]) -> str:
    runs = list(results)
    lines = ['| transform (ms per sample) | ' + ' | '.join(runs) + ' |',
             '|---|' + '---|' * len(runs)]
    for name in results[runs[0]][0]:
        cells = [f'{min(r[name] for r in results[run]):.3g} / '
                 f'{statistics.median(r[name] for r in results[run]):.3g}' for run in runs]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def source_ratios(results: Dict[str, List[Dict[str, float]]],
                  transforms: Dict[str, List[Dict[str, float]]],
                  args: argparse.Namespace) -> Dict[str, float]:
    """Frame store over files, per storage: loader frames/s, iteration, one sample (medians)."""
    if set(args.source) != {'files', 'frames'}:
        return {}

    def ratio(runs, key, grids):
        return (statistics.median(r[key] for r in runs[f'{grids}, frames'])
                / statistics.median(r[key] for r in runs[f'{grids}, files']))

    out = {}
    for grids in args.grids:
        out[f'loader_fps_frames_over_files ({grids})'] = ratio(results, 'loader_fps', grids)
        if not args.loader_only:
            out[f'iteration_frames_over_files ({grids})'] = ratio(results, 'iteration_ms', grids)
        if args.transforms:
            out[f'sample_frames_over_files ({grids})'] = ratio(transforms, 'one sample', grids)
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    cfg.merge_from_dict(args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmgrasp'))
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    store = open_label_store(GraspNetReader(cfg.train_dataloader.dataset.data_root))
    runs = [(grids, source) for grids in args.grids for source in args.source]
    results: Dict[str, List[Dict[str, float]]] = {run_name(*r, args): [] for r in runs}
    transforms: Dict[str, List[Dict[str, float]]] = {run_name(*r, args): [] for r in runs}
    for repeat in range(args.repeats):
        for grids, source in runs:
            name = run_name(grids, source, args)
            run_cfg = source_config(storage_config(cfg, grids, args), source, args)
            if args.cold:
                evict(store.path)
            if args.transforms:
                log(f'repeat {repeat + 1}/{args.repeats}: {name}: timing the transforms ...')
                transforms[name].append(time_transforms(run_cfg, args))
            log(f'repeat {repeat + 1}/{args.repeats}: {name} ...')
            figures = run_storage(run_cfg, args, device)
            results[name].append(figures)
            log(f'repeat {repeat + 1}/{args.repeats}: {name}: '
                f'{figures["loader_fps"]:.2f} frames/s, {figures["batch_mib"]:.1f} MiB/batch'
                + ('' if args.loader_only else f', iteration {figures["iteration_ms"]:.0f} ms'))
    summary = {**ratios(results), **source_ratios(results, transforms, args)}
    print(f'{args.config}, {args.repeats} repeats x {args.iterations} iterations '
          f'(+{args.warmup} warm-up), device {device}, cold={args.cold}, '
          f'model scale {args.model_scale}; cells: best / median')
    print()
    print(table(results))
    if args.transforms:
        print()
        print(f'{args.transforms} samples per repeat, in this process, single-threaded:')
        print()
        print(transform_table(transforms))
    for key, value in summary.items():
        print(f'- {key}: {value:.3g}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(config=args.config, device=str(device), cold=args.cold,
                           model_scale=args.model_scale, iterations=args.iterations,
                           warmup=args.warmup, repeats=args.repeats, results=results,
                           transforms=transforms if args.transforms else None,
                           ratios=summary), f, indent=1)


if __name__ == '__main__':
    main()
