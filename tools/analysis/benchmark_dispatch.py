#!/usr/bin/env python
"""Kernel launches and host syncs of one training iteration and one inference pass, per part.

    python tools/analysis/benchmark_dispatch.py CONFIG [--data-root DIR | --synthetic DIR]
        [--paths cuda_path torch_reference] [--json OUT] [--interpret]
        [--cfg-options KEY=VALUE ...]

The command line of :mod:`mmgrasp.analysis.dispatch_count`, whose docstring defines what
counts (a launch, a host sync, how a CUDA-only kernel in a ``kernel_scope`` is charged) and
what is run: one batch of the config's training loader through the config's model and
optimizer wrapper (a warm-up iteration, a timed one, a profiled one), then one inference pass.

Each code path runs in its own process (Triton's interpreter must be chosen before import):

- ``cuda_path``: what a CUDA device runs, on the CUDA device where there is one; on the CPU
  the point ops' CUDA branches with their torch references in the kernels' scopes, or with
  ``--interpret`` the Triton kernels themselves under Triton's interpreter (slow: demo
  sizes). ``--cfg-options model.backbone.backend=spconv`` counts spconv's sparse U-Net, on
  CUDA only.
- ``torch_reference``: the CPU reference (``model.point_ops='torch'``, the sparse U-Net's
  torch backend with its CPU algorithm), on the CPU.

On CUDA, ``cuda_path`` also reports the profiler's real figures: ``kernels`` (device kernels,
memcpys and memsets), and per part ``cuda_launches``, ``cuda_syncs`` and ``ms``.

The JSON (``--json OUT``) is ``{"cuda_path": {"train": {"launches": N, "syncs": M, "parts":
{part: {"launches": n, "syncs": m}}, "seconds": s}, "inference": {...}}, "torch_reference":
{...}}``; ``seconds`` is the wall time of the timed, unprofiled training iteration.

Without the config's dataset, ``--synthetic DIR`` writes (once) a synthetic dataset in the real
layout and label grid there (tools/data/make_synthetic.py: one scene, ten objects, 300 label
points per object, RealSense 1280x720) and uses it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from mmgrasp.analysis.dispatch_count import PATHS, child_env, child_flags, profile_path

SYNTHETIC_ARGS = ('--scenes', '1', '--frames', '{frames}', '--objects', '10',
                  '--points-per-object', '300', '--cameras', 'realsense', '--test-scenes',
                  '--quiet')


def log(message: str) -> None:
    print(f'[benchmark_dispatch] {message}', file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config')
    data = p.add_mutually_exclusive_group()
    data.add_argument('--data-root', help="dataset root (default: the config's)")
    data.add_argument('--synthetic', metavar='DIR',
                      help='write a synthetic dataset there unless present, and use it')
    p.add_argument('--paths', nargs='+', default=list(PATHS), choices=PATHS)
    p.add_argument('--json', help='write the counts to this file')
    p.add_argument('--interpret', action='store_true',
                   help="cuda_path on the CPU: run the Triton kernels under Triton's "
                        'interpreter instead of their torch references (slow: demo sizes)')
    p.add_argument('--cfg-options', nargs='+', action=DictAction, default={})
    p.add_argument('--run-path', choices=PATHS, help=argparse.SUPPRESS)  # the child process
    p.add_argument('--result', help=argparse.SUPPRESS)
    p.add_argument('--small-data', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--scoped-references', action='store_true', help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ the driver
def ensure_synthetic(folder: str, frames: int) -> str:
    """Write the synthetic dataset (with graspness) to ``folder`` unless it holds one."""
    if os.path.isdir(os.path.join(folder, 'graspness')):
        return folder
    if os.path.exists(folder) and os.listdir(folder):
        raise SystemExit(f'--synthetic {folder}: not empty and holds no synthetic dataset')
    tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data')
    log(f'writing a synthetic dataset to {folder} (about a minute) ...')
    partial = folder.rstrip('/') + '.partial'
    options = [a.format(frames=frames) for a in SYNTHETIC_ARGS]
    subprocess.run([sys.executable, os.path.join(tools, 'make_synthetic.py'), partial,
                    *options], check=True)
    subprocess.run([sys.executable, os.path.join(tools, 'generate_graspness.py'), partial],
                   check=True, stdout=subprocess.DEVNULL)
    os.replace(partial, folder)
    return folder


def table(results: dict) -> str:
    modes = [(path, mode) for path in results for mode in ('train', 'inference')]
    names = sorted({p for path, mode in modes for p in results[path][mode]['parts']})
    lines = ['| part | ' + ' | '.join(f'{path}, {mode}' for path, mode in modes) + ' |',
             '|---|' + '---:|' * len(modes)]
    for name in names + ['**total**']:
        cells = []
        for path, mode in modes:
            run = results[path][mode]
            figures = run if name == '**total**' else run['parts'].get(name)
            cells.append('-' if figures is None else
                         f"{figures['launches']} / {figures['syncs']}")
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.run_path:  # the child: one path, result to a file
        result = profile_path(args.config, args.run_path, args.cfg_options,
                              args.scoped_references, args.small_data, log)
        with open(args.result, 'w') as f:
            json.dump(result, f)
        return
    from mmengine.config import Config
    options = dict(args.cfg_options)
    if args.synthetic or args.data_root:
        cfg = Config.fromfile(args.config)
        frames = max(4, cfg.train_dataloader.batch_size)
        root = ensure_synthetic(args.synthetic, frames) if args.synthetic else args.data_root
        options['train_dataloader.dataset.data_root'] = os.path.abspath(root)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.paths:
            result = os.path.join(tmp, f'{path}.json')
            command = [sys.executable, os.path.abspath(__file__), args.config, '--run-path',
                       path, '--result', result]
            if args.synthetic or args.data_root:
                command.append('--small-data')
            command += child_flags(path, args.interpret)
            if options:
                command += ['--cfg-options'] + [f'{k}={_option(v)}' for k, v in
                                                options.items()]
            subprocess.run(command, check=True, env=child_env(path, args.interpret))
            with open(result) as f:
                results[path] = json.load(f)
    print(f'{args.config}: kernel launches / host syncs per part, one training iteration '
          'and one inference pass')
    print()
    print(table(results))
    for path, run in results.items():
        print(f"- {path}: training iteration {run['train']['seconds']:.2f} s unprofiled on "
              f"{run['device']}; point ops: {run['point_ops']}")
    if args.json:
        partial = args.json + '.partial'
        with open(partial, 'w') as f:
            json.dump(results, f, indent=1)
        os.replace(partial, args.json)


def _option(value) -> str:
    """A --cfg-options value as DictAction reads it back."""
    if isinstance(value, (list, tuple)):
        inner = ','.join(_option(v) for v in value)
        return f'[{inner}]' if isinstance(value, list) else f'({inner})'
    return str(value)


if __name__ == '__main__':
    main()
