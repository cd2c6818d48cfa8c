#!/usr/bin/env python
"""Where a training iteration spends its time, dense against deferred label grids, the frame
store against the dataset files, and mmgrasp's loader against the original repositories' loaders.

    python tools/analysis/benchmark_loader.py CONFIG [CONFIG ...] [--grids dense deferred]
        [--scenes N] [--iterations 30] [--warmup 3] [--repeats 3] [--workers N] [--cold]
        [--model-scale S] [--source files frames] [--reference CHECKOUT ...]
        [--transforms N] [--loader-only] [--json OUT] [--cfg-options KEY=VALUE ...]

Runs each config's real training pipeline, data loader, model and optimizer on the config's
dataset (the first N scenes of its split). In every repeat the runs go back to back on the same
frames, the same sampling and the same initial weights. Each run measures

- the loader alone, over exactly (warm-up + iterations) batches of the same frames in the same
  order: time to the first batch (fresh workers), frames/s after the warm-up, the CPU time the
  loader workers spent per sample (user + system, read when they exit; the process's own with
  ``--workers 0``), of it what the same workers cost when started and stopped with no sample
  (fork, start-up, exit: fixed per run, spread over its samples) and the rest per sample, and
  the bytes of a batch as it leaves a worker (every tensor storage's bytes once, plus the
  pickled rest);
- training iterations (not with ``--loader-only``): the wait for the loader,
  ``batch.to(device)`` (the data preprocessor), the forward pass and inside it the model's parts
  (backbone, seed selection, view stage, assigner — where deferred grids are read —, grouper,
  head, losses), backward, the optimizer step and the whole iteration (means).

The table gives "best / median" over the repeats. On CUDA the device is synchronised around each
part. ``--cold`` evicts the label store's files from the page cache before every run
(POSIX_FADV_DONTNEED), so the read-ahead can be measured. ``--model-scale`` multiplies the
network's channel widths (never the data) for CPUs too slow to run the paper-size network.

``--source files frames`` runs each storage with ``LoadGraspScene(source=...)`` set to each
source (PNG/MAT files, or the frame store), back to back, and gives the frames/files ratios.
``--reference CHECKOUT ...`` adds, for each config whose recipe one of the checkouts is the
original of (graspnet-baseline for GraspNet-baseline and Scale-Balanced-Grasp,
graspness_implementation for GSNet, EconomicGrasp), a run of that repository's own training
loader on the same frames with the same workers and batch size (reference_loaders.py says what
runs unchanged and what is stood in for), and the ratios of mmgrasp's loader to it; the
reference is measured by the loader-alone figures only. ``--transforms N`` times each pipeline
transform's CPU over N samples, in this process and single-threaded like a loader worker
(mmdet's DatasetBenchmark), one sample part by part, and the CPU of collating those samples into
batches and pickling them as a worker sends them, then profiles a second pass over the same
samples (cProfile on the process clock: the functions a sample spends its CPU time in).
``--loader-only`` skips the training iterations (no model is built). With several configs, a
summary table of the loader figures closes the report, one row per config.
"""
import argparse
import copy
import cProfile
import gc
import io
import json
import os
import pickle
import pstats
import statistics
import sys
import tempfile
import time
from multiprocessing.reduction import ForkingPickler
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch
from mmengine.config import Config, DictAction
from mmengine.dataset import pseudo_collate
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.registry import DATASETS, MODELS
from mmgrasp.storage.labels import maps as label_maps
from mmgrasp.storage.readers import pop_map_copy_bytes, pop_map_copy_seconds
from mmgrasp.storage.labels.store import open_label_store

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_loaders import (REFERENCE_OF, reference_dataset, reference_kind,  # noqa: E402
                               seed_worker)

PARTS = ('backbone', 'seed_selection', 'view', 'assigner', 'grouper', 'head', 'losses')
ROWS = [('loader_fps', 'loader frames/s', 1),
        ('worker_cpu_ms', 'loader worker CPU per sample (ms)', 1),
        ('worker_fixed_ms', '  of the run: workers started and stopped with no sample (ms)', 1),
        ('worker_net_cpu_ms', '  per sample without that (ms)', 1),
        ('batch_mib', 'batch leaving a worker (MiB)', 1),
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
    p.add_argument('configs', nargs='+', metavar='CONFIG')
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
    p.add_argument('--reference', nargs='+', default=[], metavar='CHECKOUT',
                   help="checkouts of original repositories whose training loaders run too")
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
        raise SystemExit(f'{cfg.filename}: the train pipeline has no SampleGraspLabels or '
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
        raise SystemExit(f'{cfg.filename}: the train pipeline has no LoadGraspScene')
    for t in found:
        t['source'] = source
    return cfg


def run_name(grids: str, source: str, args: argparse.Namespace) -> str:
    return grids if len(args.source) == 1 else f'{grids}, {source}'


class TimedTransform:
    """A pipeline transform that adds up the CPU time of its calls (process clock: the
    machine's other jobs do not count)."""

    def __init__(self, transform, name: str):
        self.transform, self.__name__, self.seconds = transform, name, 0.0

    def __call__(self, results: dict) -> dict:
        start = time.process_time()
        out = self.transform(results)
        self.seconds += time.process_time() - start
        return out


def profile_samples(dataset, args: argparse.Namespace, top: int = 12) -> str:
    """The functions a sample spends its CPU time in (cProfile on the process clock, own time
    first) over the ``args.transforms`` samples of :func:`time_transforms`, per sample."""
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for i in range(args.transforms):
        dataset[(1 + i // len(dataset), i % len(dataset))]
    profile.disable()
    rows = sorted(pstats.Stats(profile).stats.items(), key=lambda item: -item[1][2])[:top]
    lines = ['| function | own CPU ms per sample | with callees |', '|---|---|---|']
    for (path, line, name), (_, _, own, cumulative, _) in rows:
        where = f'{os.path.basename(path)}:{line}({name})' if line else name
        lines.append(f'| `{where}` | {own * 1e3 / args.transforms:.3g} | '
                     f'{cumulative * 1e3 / args.transforms:.3g} |')
    return '\n'.join(lines)


def time_transforms(cfg: Config, args: argparse.Namespace,
                    profiles: Optional[Dict[str, str]] = None,
                    name: str = '') -> Dict[str, float]:
    """Milliseconds per sample of each transform and of the whole sample, over
    ``args.transforms`` samples after one warm-up sample (stores opened, maps made); with
    ``profiles``, a second pass profiled (:func:`profile_samples`) is kept there under
    ``name``."""
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
        start = time.process_time()
        samples = [dataset[(1 + i // len(dataset), i % len(dataset))]
                   for i in range(args.transforms)]
        total = time.process_time() - start
        # read before the profiled pass, which runs the timed transforms again
        out = {t.__name__: t.seconds * 1e3 / args.transforms for t in timed}
        out['one sample'] = total * 1e3 / args.transforms
        out.update(send_cpu(samples, cfg.train_dataloader.batch_size))
        del samples
        if profiles is not None:
            profiles[name] = profile_samples(dataset, args)
    finally:
        torch.set_num_threads(threads)
    return out


def send_cpu(samples: list, batch_size: int) -> Dict[str, float]:
    """CPU ms per sample of what a loader worker does with its samples after the pipeline:
    collate them into batches and pickle each batch as its result queue does (every tensor
    storage moved into shared memory: ``ForkingPickler``)."""
    start = time.process_time()
    batches = [pseudo_collate(samples[i:i + batch_size])
               for i in range(0, len(samples), batch_size)]
    collated = time.process_time()
    for batch in batches:
        ForkingPickler.dumps(batch)
    sent = time.process_time()
    return {'collate': (collated - start) * 1e3 / len(samples),
            'pickle to shared memory': (sent - collated) * 1e3 / len(samples)}


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
    """Bytes of a batch leaving a worker: every tensor storage (once, however many tensors
    view it) plus the pickled rest."""
    storages = {}

    class Counter(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, torch.Tensor):
                storage = obj.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
                return ('tensor', id(obj))
            return None

    buffer = io.BytesIO()
    Counter(buffer, protocol=5).dump(batch)
    return sum(storages.values()) + buffer.tell()


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


def sample_order(num_samples: int, dataset_size: int, seed: int) -> List[tuple]:
    """(epoch, index) of ``num_samples`` samples, each epoch a permutation (what
    EpochAwareSampler yields), the same for every run of a config."""
    rng, order, epoch = np.random.default_rng(seed), [], 0
    while len(order) < num_samples:
        order += [(epoch, int(i)) for i in rng.permutation(dataset_size)]
        epoch += 1
    return order[:num_samples]


def children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def loader_alone(dataset, collate: Callable, order: Sequence, batch_size: int, workers: int,
                 args: argparse.Namespace, worker_init_fn: Optional[Callable] = None
                 ) -> Dict[str, float]:
    """Loader figures over exactly the samples of ``order``: workers start, serve them and
    exit, so the CPU they spent (read from the exited children) belongs to these samples."""
    gc.collect()
    cpu0 = children_cpu() if workers else time.process_time()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=list(order),
                                         num_workers=workers, collate_fn=collate,
                                         worker_init_fn=worker_init_fn)
    start = time.perf_counter()
    batches = iter(loader)
    first = next(batches)
    out = dict(first_batch_s=time.perf_counter() - start, batch_mib=batch_bytes(first) / 2 ** 20)
    del first
    for _ in range(max(args.warmup, 1) - 1):
        next(batches)
    frames, start = 0, time.perf_counter()
    for batch in batches:  # to the end: the workers exit
        frames += len(batch['data_samples']) if 'data_samples' in batch else batch_size
    out['loader_fps'] = frames / (time.perf_counter() - start)
    del batches, loader, batch
    gc.collect()
    spent = children_cpu() if workers else time.process_time()
    out['worker_cpu_ms'] = (spent - cpu0) * 1e3 / len(order)
    if workers:  # the same workers started and stopped with no sample: their fixed cost
        cpu0 = children_cpu()
        list(torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=[],
                                         num_workers=workers, collate_fn=collate,
                                         worker_init_fn=worker_init_fn))
        gc.collect()
        fixed = children_cpu() - cpu0
        out['worker_fixed_ms'] = fixed * 1e3
        out['worker_net_cpu_ms'] = out['worker_cpu_ms'] - fixed * 1e3 / len(order)
    return out


def loader_plan(cfg: Config, args: argparse.Namespace):
    """(batch size, workers, sample order) of a config's loader runs."""
    loader = cfg.train_dataloader
    workers = loader.num_workers if args.workers is None else args.workers
    dataset = DATASETS.build(copy.deepcopy(loader.dataset))
    order = sample_order((max(args.warmup, 1) + args.iterations) * loader.batch_size,
                         len(dataset), cfg.get('randomness', {}).get('seed', 0) or 0)
    return loader.batch_size, workers, order, dataset


def run_storage(cfg: Config, args: argparse.Namespace, device: torch.device) -> Dict[str, float]:
    seed = cfg.get('randomness', {}).get('seed', 0) or 0
    if cfg.train_dataloader.collate_fn.get('type') != 'pseudo_collate':
        raise SystemExit(f'{cfg.filename}: the loader benchmark collates with pseudo_collate')
    batch_size, workers, order, dataset = loader_plan(cfg, args)
    out = loader_alone(dataset, pseudo_collate, order, batch_size, workers, args)
    del dataset
    if args.loader_only:
        return out
    total = args.warmup + args.iterations

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
            values = [r[key] for r in results[storage] if key in r]
            if not values:  # the reference: loader figures only
                cells.append('')
                continue
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
    lines = ['| transform (CPU ms per sample) | ' + ' | '.join(runs) + ' |',
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


def reference_run(cfg: Config, checkout: str, kind: str, args: argparse.Namespace,
                  work_dir: str) -> Dict[str, float]:
    """The original repository's training loader on the frames and sample order of
    :func:`run_storage`, with the config's points, voxel size, batch size and workers."""
    batch_size, workers, order, dataset = loader_plan(cfg, args)
    frames = [(info['scene'], info['frame'])
              for info in (dataset.get_data_info(i) for i in range(len(dataset)))]
    load = next(t for t in cfg.train_dataloader.dataset.pipeline
                if t['type'] == 'LoadGraspScene')
    reference, collate = reference_dataset(
        checkout, kind, dataset.reader.root, dataset.camera, frames, load['num_points'],
        load.get('voxel_size') or 0.005, work_dir)
    del dataset
    return loader_alone(reference, collate, [i for _, i in order], batch_size, workers, args,
                        seed_worker)


def references_of(cfg: Config, checkouts: Dict[str, str]) -> Optional[tuple]:
    kind = REFERENCE_OF.get(cfg.model.type)
    return (checkouts[kind], kind) if kind in checkouts else None


def reference_ratios(results: Dict[str, List[Dict[str, float]]]) -> Dict[str, float]:
    """mmgrasp's runs against the reference: loader frames/s and worker CPU per sample."""
    refs = [name for name in results if name.startswith('reference')]
    if not refs:
        return {}

    def median(run, key):
        return statistics.median(r[key] for r in results[run])

    out = {}
    for run in results:
        if run in refs:
            continue
        out[f'loader_fps_over_reference ({run})'] = (median(run, 'loader_fps')
                                                     / median(refs[0], 'loader_fps'))
        out[f'reference_worker_cpu_over ({run})'] = (median(refs[0], 'worker_cpu_ms')
                                                     / median(run, 'worker_cpu_ms'))
        if all('worker_net_cpu_ms' in results[r][0] for r in (run, refs[0])):
            out[f'reference_worker_net_cpu_over ({run})'] = (
                median(refs[0], 'worker_net_cpu_ms') / median(run, 'worker_net_cpu_ms'))
    return out


def summary_table(reports: List[dict]) -> str:
    """One row per config: loader frames/s and worker CPU per sample of every run, the
    original loader's in one column (medians), and mmgrasp's frames/s over the original's."""
    def cell(figures) -> str:
        return (f"{statistics.median(f['loader_fps'] for f in figures):.3g}, "
                f"{statistics.median(f['worker_cpu_ms'] for f in figures):.3g}")

    runs = list(dict.fromkeys(run for r in reports for run in r['results']
                              if not run.startswith('reference')))
    lines = ['| config | ' + ' | '.join(f'{run}: frames/s, worker CPU ms/sample' for run in runs)
             + ' | original loader: frames/s, worker CPU ms/sample | '
             + ' | '.join(f'{run} / original (frames/s)' for run in runs) + ' |',
             '|---|' + '---|' * (2 * len(runs) + 1)]
    for report in reports:
        results = report['results']
        cells = [cell(results[run]) if run in results else '' for run in runs]
        refs = [run for run in results if run.startswith('reference')]
        cells.append(f'{refs[0][len("reference ("):-1]}: {cell(results[refs[0]])}'
                     if refs else '')
        for run in runs:
            ratio = report['ratios'].get(f'loader_fps_over_reference ({run})')
            cells.append('' if ratio is None else f'{ratio:.3g}')
        lines.append(f"| {os.path.basename(report['config'])} | " + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def benchmark(path: str, args: argparse.Namespace, device: torch.device,
              checkouts: Dict[str, str]) -> dict:
    cfg = Config.fromfile(path)
    cfg.merge_from_dict(args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmgrasp'))
    store = open_label_store(GraspNetReader(cfg.train_dataloader.dataset.data_root))
    runs = [(grids, source) for grids in args.grids for source in args.source]
    results: Dict[str, List[Dict[str, float]]] = {run_name(*r, args): [] for r in runs}
    transforms: Dict[str, List[Dict[str, float]]] = {run_name(*r, args): [] for r in runs}
    reference = references_of(cfg, checkouts)
    if reference:
        results[f'reference ({reference[1]})'] = []
    profiles: Dict[str, str] = {}  # the last repeat's
    work_dir = tempfile.mkdtemp(prefix='benchmark_loader_')
    for repeat in range(args.repeats):
        for grids, source in runs:
            name = run_name(grids, source, args)
            run_cfg = source_config(storage_config(cfg, grids, args), source, args)
            if args.cold:
                evict(store.path)
            if args.transforms:
                log(f'repeat {repeat + 1}/{args.repeats}: {name}: timing the transforms ...')
                transforms[name].append(time_transforms(run_cfg, args, profiles, name))
            log(f'repeat {repeat + 1}/{args.repeats}: {name} ...')
            figures = run_storage(run_cfg, args, device)
            results[name].append(figures)
            log(f'repeat {repeat + 1}/{args.repeats}: {name}: '
                f'{figures["loader_fps"]:.2f} frames/s, {figures["worker_cpu_ms"]:.1f} ms '
                f'worker CPU/sample, {figures["batch_mib"]:.1f} MiB/batch'
                + ('' if args.loader_only else f', iteration {figures["iteration_ms"]:.0f} ms'))
        if reference:
            name = f'reference ({reference[1]})'
            log(f'repeat {repeat + 1}/{args.repeats}: {name} ...')
            figures = reference_run(storage_config(cfg, args.grids[0], args), *reference, args,
                                    work_dir)
            results[name].append(figures)
            log(f'repeat {repeat + 1}/{args.repeats}: {name}: {figures["loader_fps"]:.2f} '
                f'frames/s, {figures["worker_cpu_ms"]:.1f} ms worker CPU/sample, '
                f'{figures["batch_mib"]:.1f} MiB/batch')
    summary = {**ratios(results), **source_ratios(results, transforms, args),
               **reference_ratios(results)}
    print(f'{path}, {args.repeats} repeats x {args.iterations} iterations '
          f'(+{args.warmup} warm-up), device {device}, cold={args.cold}, '
          f'model scale {args.model_scale}; cells: best / median')
    print()
    print(table(results))
    if args.transforms:
        print()
        print(f'{args.transforms} samples per repeat, in this process, single-threaded:')
        print()
        print(transform_table(transforms))
        for name, text in profiles.items():
            print()
            print(f'{name}: where a sample spends its CPU time (cProfile, a second pass over '
                  f'the same samples, last repeat):')
            print()
            print(text)
    for key, value in summary.items():
        print(f'- {key}: {value:.3g}')
    print()
    return dict(config=path, device=str(device), cold=args.cold, model_scale=args.model_scale,
                iterations=args.iterations, warmup=args.warmup, repeats=args.repeats,
                results=results, transforms=transforms if args.transforms else None,
                ratios=summary)


def main(argv=None) -> None:
    args = parse_args(argv)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    checkouts = {}
    for checkout in args.reference:
        checkouts[reference_kind(checkout)] = os.path.abspath(checkout)
    reports = [benchmark(path, args, device, checkouts) for path in args.configs]
    if len(reports) > 1:
        print(summary_table(reports))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(reports[0] if len(reports) == 1 else dict(configs=reports), f, indent=1)


if __name__ == '__main__':
    main()
