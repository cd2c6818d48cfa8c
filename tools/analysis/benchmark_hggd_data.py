#!/usr/bin/env python
"""HGGD's image path: what a loader worker spends and ships per frame, what the data
preprocessor spends per batch, against THU-VCLab/HGGD's own dataset class on the same frames.

    python tools/analysis/benchmark_hggd_data.py [--frames 8] [--grasps 3000] [--batch 4]
        [--reference HGGD_SRC --reference-python HGGD_PYTHON]
        [--json OUT]

Writes a synthetic GraspNet-1Billion root at the real size (1280 x 720, RealSense) in a
temporary folder, with a hand-made per-image grasp record of ``--grasps`` rows a frame (the
reference's label format), and measures, single-threaded:

- worker: CPU seconds per sample of mmgrasp's pipeline (the PNG files read as the reference
  reads them, LoadHGGDGrasps, SampleDepthPixels, PackHGGDInputs), transform by transform, and
  the bytes of a batch as it leaves a worker;
- the reference: CPU seconds per sample of ``GraspnetPointDataset.__getitem__`` (its PIL resize,
  normalisation and Python target loops) on the same frames and records, run in its own
  environment (``--reference-python``, numpy 1.23.5; the module stand-ins of
  tools/analysis/golden/make_hggd_targets_golden.py), and the bytes of its batch;
- the data preprocessor on a batch: CPU seconds (one and two threads), and on its CUDA code
  path counted on the CPU (mmgrasp/analysis/dispatch_count.py): kernel launches, host syncs and
  the peak of live tensor bytes.

The images are read from the PNG files (``LoadRGBDImage(source='files')``); the grasp records
are made by hand on the frames (tests/unit/models/_hggd_data_inputs.py), at any image size.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tensor_bytes(obj) -> int:
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    if hasattr(obj, 'all_items'):
        return sum(_tensor_bytes(v) for _, v in obj.all_items())
    return 0


def write_dataset(root: str, frames: int, grasps: int) -> dict:
    """The synthetic root and its records, also written in the reference's label layout
    (``<root>/hggd_labels/6d_dataset/scene_0/grasp_labels/{frame}_view.npz``)."""
    from mmgrasp.datasets.layouts import open_reader
    from mmgrasp.datasets.synthetic import write_synthetic_dataset
    inputs = _load('tests/unit/models/_hggd_data_inputs.py', '_hggd_data_inputs')
    write_synthetic_dataset(root, scenes=1, frames=frames, objects=8, points_per_object=40,
                            grid=(5, 3, 3), image_size=(1280, 720), cameras=('realsense',),
                            seed=0, progress=False, test_scenes=())
    store = inputs.RecordStore(open_reader(root, 'realsense'), grasps)
    labels = os.path.join(root, 'hggd_labels', '6d_dataset', 'scene_0', 'grasp_labels')
    os.makedirs(labels)
    for frame in range(frames):
        np.savez(os.path.join(labels, f'{frame}_view.npz'), **store.frame(0, frame))
    return dict(store=store, inputs=inputs)


def time_mmgrasp(root: str, prepared: dict, batch: int) -> dict:
    import torch
    from mmengine.dataset import pseudo_collate
    from torch.profiler import ProfilerActivity, profile

    from mmgrasp.analysis.dispatch_count import count_events
    from mmgrasp.datasets import GraspNetDataset
    from mmgrasp.datasets.transforms import hggd
    from mmgrasp.models.data_preprocessors import HGGDDataPreprocessor
    from mmgrasp.models.utils.live_bytes import LiveBytes

    hggd.open_grasp_store = lambda reader, *options: prepared['store']
    steps = [('read PNG files', dict(type='LoadRGBDImage', source='files')),
             ('LoadHGGDGrasps', dict(type='LoadHGGDGrasps')),
             ('SampleDepthPixels', dict(type='SampleDepthPixels', num_points=25600)),
             ('PackHGGDInputs', dict(type='PackHGGDInputs'))]
    dataset = GraspNetDataset(root, pipeline=[s for _, s in steps], seed=0)
    transforms = dataset.pipeline.transforms
    seconds = {name: 0. for name, _ in steps}

    def timed(index, t, name):
        def run(results):
            start = time.process_time()
            out = t(results)
            seconds[name] += time.process_time() - start
            return out
        return run
    dataset.pipeline.transforms = [timed(i, t, n) for i, (t, (n, _)) in
                                   enumerate(zip(transforms, steps))]
    torch.set_num_threads(1)
    dataset[0]  # warm-up: the store, the caches
    seconds.update({k: 0. for k in seconds})
    start = time.process_time()
    samples = [dataset[i] for i in range(len(dataset))]
    per_sample = (time.process_time() - start) / len(samples)
    worker = {k: v / len(samples) for k, v in seconds.items()}
    worker['one sample'] = per_sample
    data = pseudo_collate(samples[:batch])
    out = dict(worker_s=worker, batch_bytes=_tensor_bytes(data))

    pre = HGGDDataPreprocessor()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        pre(data, training=True)
        start = time.process_time()
        wall = time.perf_counter()
        for _ in range(2):
            pre(data, training=True)
        out[f'preprocess_cpu_s_{threads}_threads'] = (time.process_time() - start) / 2
        out[f'preprocess_wall_s_{threads}_threads'] = (time.perf_counter() - wall) / 2
    torch.set_num_threads(1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        pre(data, training=True)
    counted = count_events(prof.events())
    out['launches'] = sum(p['launches'] for p in counted.values())
    out['syncs'] = sum(p['syncs'] for p in counted.values())
    with LiveBytes(None) as live:
        live.adopt([t for v in data['inputs'].values() for t in v])
        before = live.live
        result = pre(data, training=True)
    out['peak_bytes'] = live.peak - before
    out['output_bytes'] = _tensor_bytes(result['inputs'])
    return out


def run_reference(source: str, root: str, frames: int) -> dict:
    """In the reference's environment: GraspnetPointDataset on the root's frames."""
    golden = _load('tools/analysis/golden/make_hggd_targets_golden.py', 'golden_generator')
    golden._stub_modules(source)
    import torch
    from dataset.graspnet_dataset import GraspnetPointDataset
    torch.set_num_threads(1)
    dataset = GraspnetPointDataset(25600, os.path.join(root, 'hggd_labels'), root, [0], 8, 6,
                                   20., 50., 5000, sigma=10, random_rotate=False,
                                   random_zoom=False, output_size=(640, 360), include_rgb=True,
                                   include_depth=True, noise=0, aug=False)
    dataset.unaug()  # the training script does so every epoch
    dataset[0]
    start = time.process_time()
    items = [dataset[i] for i in range(frames)]
    per_sample = (time.process_time() - start) / frames
    anchor, colour, depth, _ = items[0]
    x, targets = anchor[0], anchor[1]
    sample_bytes = sum(t.numel() * t.element_size() for t in (x, *targets)) + \
        colour.nbytes + depth.nbytes
    return dict(worker_s=per_sample, sample_bytes=sample_bytes, numpy=np.__version__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--frames', type=int, default=8)
    parser.add_argument('--grasps', type=int, default=3000)
    parser.add_argument('--batch', type=int, default=4)
    parser.add_argument('--reference', help='a checkout of THU-VCLab/HGGD')
    parser.add_argument('--reference-python',
                        help='the python of the reference environment (with --reference)')
    parser.add_argument('--json')
    parser.add_argument('--reference-run', nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference and not args.reference_python:
        parser.error('--reference needs --reference-python: the python of an environment with '
                     'the reference\'s pins (numpy 1.23.5)')
    if args.reference_run:
        source, root, frames = args.reference_run
        print(json.dumps(run_reference(source, root, int(frames))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, 'graspnet')
        prepared = write_dataset(root, args.frames, args.grasps)
        results = dict(frames=args.frames, grasps=args.grasps, batch=args.batch,
                       mmgrasp=time_mmgrasp(root, prepared, args.batch))
        if args.reference:
            done = subprocess.run([args.reference_python, os.path.abspath(__file__),
                                   '--reference-run', args.reference, root, str(args.frames)],
                                  capture_output=True, text=True, check=True,
                                  env=dict(os.environ, OMP_NUM_THREADS='1'))
            results['reference'] = json.loads(done.stdout.strip().splitlines()[-1])
    report(results)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


def report(results: dict) -> None:
    mine = results['mmgrasp']
    print(f"{results['frames']} frames of 1280 x 720, {results['grasps']} grasp rows a frame, "
          f"batch {results['batch']}")
    print('worker, CPU ms per sample (one thread):')
    for name, value in mine['worker_s'].items():
        print(f'  {name:<20} {value * 1e3:8.1f}')
    print(f"batch leaving a worker: {mine['batch_bytes'] / 2 ** 20:.1f} MiB")
    for threads in (1, 2):
        print(f"preprocessor, batch of {results['batch']}, {threads} thread(s): "
              f"{mine[f'preprocess_cpu_s_{threads}_threads']:.2f} s CPU, "
              f"{mine[f'preprocess_wall_s_{threads}_threads']:.2f} s wall")
    print(f"preprocessor, CUDA path counted on the CPU: {mine['launches']} launches, "
          f"{mine['syncs']} host syncs, peak {mine['peak_bytes'] / 2 ** 20:.0f} MiB live "
          f"(outputs {mine['output_bytes'] / 2 ** 20:.0f} MiB)")
    if 'reference' in results:
        ref = results['reference']
        print(f"reference GraspnetPointDataset (numpy {ref['numpy']}): "
              f"{ref['worker_s'] * 1e3:.1f} ms CPU per sample, ratio to mmgrasp's worker "
              f"{ref['worker_s'] / mine['worker_s']['one sample']:.1f}x; its batch "
              f"{ref['sample_bytes'] * results['batch'] / 2 ** 20:.1f} MiB")


if __name__ == '__main__':
    main()
