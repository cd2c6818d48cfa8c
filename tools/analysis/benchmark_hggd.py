#!/usr/bin/env python
"""HGGD's cost on the CPU, on synthetic batches at the paper's size (batch 4, 640×360 images,
1280×720 depth, 25 600 points, 3 000 grasp records a frame; mmgrasp/analysis/hggd_synthetic.py):

- ``count``: kernel launches, host syncs and peak live bytes of one training iteration that
  steps the optimizer (forward, losses, backward, fused AdamW with clipping) and of one
  inference pass, as ``mmgrasp/analysis/dispatch_count.py`` counts them for the CUDA path (the
  point ops charged as their Triton kernels, their torch references run in their place),
  after one unmeasured training iteration (the optimizer makes its state at its first step:
  624 fills, once a training);
- ``cnn``: the image network's forward + backward in float32, with channels-last memory, and
  under bfloat16 autocast: its time (median of ``--repeats`` after one warm-up; ``0``: none),
  and the launches, syncs and peak live bytes of one such step, counted as ``count`` counts.

    python tools/analysis/benchmark_hggd.py count [--batch 4] [--measure all] [--json OUT]
    python tools/analysis/benchmark_hggd.py cnn [--batch 1] [--repeats 3]  # --repeats 0: counts only

At paper size the CPU holds what the GPU would (about 6 GB of tensors at the peak) and more:
on a shared machine run ``--measure launches`` and ``--measure peak`` as two processes, one
thread each, with glibc returning freed blocks at once (``MALLOC_MMAP_THRESHOLD_=131072``),
or the process's resident memory grows to twice the live tensors.

The model is configs/_base_/models/hggd.py (with the plain data preprocessor: the batches are
already the model's inputs).
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(REPO, 'configs', '_base_', 'models', 'hggd.py')
SCHEDULE = os.path.join(REPO, 'configs', '_base_', 'schedules', 'adamw_step_15e.py')


def build_model(point_ops: str = 'torch'):
    from mmengine.config import Config

    from mmgrasp.apis import register_all_modules
    from mmgrasp.registry import MODELS, build_in_scope
    register_all_modules(False)
    cfg = Config.fromfile(MODEL)
    cfg.model.data_preprocessor = dict(type='GraspDataPreprocessor')
    cfg.model.point_ops = point_ops
    torch.manual_seed(0)
    return build_in_scope(MODELS, cfg.model)


def count(args) -> dict:
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from torch.profiler import ProfilerActivity, profile

    from mmgrasp.analysis import dispatch_count as dc
    from mmgrasp.analysis.hggd_synthetic import make_batch
    dc.ScopedReferences().install()
    model = build_model()
    inputs, samples = make_batch(batch=args.batch, image=(640, 360), points=25600,
                                 grasps=3000)
    optim_cfg = copy.deepcopy(Config.fromfile(SCHEDULE).optim_wrapper)
    optim_cfg.accumulative_counts = 1  # the counted iteration is one that steps
    optim = build_optim_wrapper(model, optim_cfg)
    numels = {len(g['params']): [p.numel() for p in g['params']]
              for g in optim.optimizer.param_groups}
    spans = []

    def train():
        model.train()
        with dc.stage('forward', spans):
            losses = model.loss(inputs, samples)
        with dc.stage('losses', spans):
            loss, _ = model.parse_losses(losses)
        with dc.stage('backward', spans):
            loss.backward()
        with dc.stage('optimizer', spans):
            optim.step()
            optim.zero_grad()

    def inference():
        model.eval()
        with torch.no_grad(), dc.stage('forward', spans):
            model.predict(inputs, samples)

    start = time.perf_counter()
    train()  # the warm-up: the optimizer's state
    out = {'warmup_seconds': round(time.perf_counter() - start, 1)}
    print(json.dumps(out), file=sys.stderr, flush=True)
    for mode, run in (('train', train), ('inference', inference)):
        if args.measure == 'peak':
            break
        spans.clear()
        start = time.perf_counter()
        # the shapes: the sizes of the tensors a multi-tensor (foreach) op works on
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            run()
        seconds = time.perf_counter() - start
        parts = dc.count_events(prof.events(), [s for s in spans if s[0] != 'forward'], numels)
        if 'forward' in parts:
            other = parts.pop('forward')
            parts.setdefault('other', dict(launches=0, syncs=0))
            for key in ('launches', 'syncs'):
                parts['other'][key] += other[key]
        out[mode] = dict(dc.summarise(parts), seconds_profiled=round(seconds, 1))
        print(json.dumps({mode: out[mode]}), file=sys.stderr, flush=True)  # kept if cut short
    if args.measure != 'launches':
        out.setdefault('train', {})['peak_bytes'] = dc.peak_bytes(
            train, torch.device('cpu'), [model.state_dict(keep_vars=True),
                                         [p.grad for p in model.parameters()],
                                         optim.optimizer.state, inputs])
    return out


def cnn(args) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from mmgrasp.analysis import dispatch_count as dc
    from mmgrasp.models.backbones import AnchorGraspNet
    torch.manual_seed(0)
    images = torch.randn(args.batch, 4, 640, 360)
    results = {}
    for name in ('float32', 'channels_last', 'bf16_autocast'):
        net = AnchorGraspNet().train()
        x = images.clone()
        if name == 'channels_last':
            net = net.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)

        def step():
            with torch.autocast('cpu', dtype=torch.bfloat16, enabled=name == 'bf16_autocast'):
                out = net(x)
                loss = sum(v.float().mean() for k, v in out.items() if k != 'features')
            loss.backward()
            net.zero_grad(set_to_none=False)

        step()  # the warm-up: the gradients' buffers
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        counted = dc.summarise(dc.count_events(prof.events()))
        peak = dc.peak_bytes(step, torch.device('cpu'), [net.state_dict(keep_vars=True),
                                                        [p.grad for p in net.parameters()], x])
        results[name] = dict(seconds=statistics.median(times) if times else None,
                             launches=counted['launches'], syncs=counted['syncs'],
                             peak_bytes=peak['peak'])
        print(json.dumps({name: results[name]}), file=sys.stderr, flush=True)
    base = results['float32']['seconds']
    for figures in results.values():
        if base and figures['seconds']:
            figures['ratio'] = round(figures['seconds'] / base, 2)
            figures['seconds'] = round(figures['seconds'], 3)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('what', choices=('count', 'cnn'))
    parser.add_argument('--batch', type=int, default=None,
                        help='frames a batch (count: 4, cnn: 1)')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--measure', choices=('all', 'launches', 'peak'), default='all',
                        help='count: launches and syncs (train, inference), the training '
                             "iteration's peak live bytes, or both")
    parser.add_argument('--json', help='also write the figures here')
    args = parser.parse_args(argv)
    args.batch = args.batch or (4 if args.what == 'count' else 1)
    print(f'{args.what}: batch {args.batch}, {torch.get_num_threads()} threads, '
          f'torch {torch.__version__}', file=sys.stderr)
    result = dict(count=count, cnn=cnn)[args.what](args)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json + '.tmp', 'w') as f:
            f.write(text + '\n')
        os.replace(args.json + '.tmp', args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
