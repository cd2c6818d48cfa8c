#!/usr/bin/env python
"""Curves and timings from mmengine's ``vis_data/scalars.json`` logs, in mmdet's command shape.

    python tools/analysis/analyze_logs.py plot_curve LOG.json [LOG2.json ...] --keys loss \
        [loss_view ...] [--legend A B ...] [--title T] --out curve.png
    python tools/analysis/analyze_logs.py cal_train_time LOG.json [...]

Each line of a scalars.json is one JSON record; training records carry ``step`` (the iteration)
and ``epoch``, validation records (``seen/AP``, ...) carry ``step`` = the epoch. ``plot_curve``
draws one line per (log, key) against its records' ``step``, offscreen (matplotlib Agg: there is
no window, so ``--out`` is required); with several logs each line is named by its run's config
(the ``<config>.py`` mmengine dumps into the work dir; the run's timestamp folder is added where
two logs share a config); a key that no record of a log holds stops the tool naming the keys
the log has.
``cal_train_time`` prints the mean, slowest and fastest epoch's mean ``time`` per iteration.
"""
import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Dict, List


def read_log(path: str) -> List[dict]:
    """The records of a scalars.json; SystemExit naming the file and line when one is not
    JSON."""
    if not os.path.isfile(path):
        raise SystemExit(f'{path}: no such log')
    records = []
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise SystemExit(f'{path}:{number}: not a JSON record ({err.msg})') from None
            if not isinstance(record, dict):
                raise SystemExit(f'{path}:{number}: not a JSON object')
            records.append(record)
    return records


def curve(records: List[dict], key: str) -> tuple:
    """(steps, values) of the records holding ``key``, in file order."""
    held = [r for r in records if key in r]
    return [r.get('step', i) for i, r in enumerate(held)], [float(r[key]) for r in held]


def run_name(path: str) -> str:
    """The config a ``WORK_DIR/<timestamp>/vis_data/scalars.json`` comes from: the one
    ``<config>.py`` mmengine dumps into ``WORK_DIR``, else the work dir's name."""
    work_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    configs = sorted(n[:-len('.py')] for n in os.listdir(work_dir) if n.endswith('.py')) \
        if os.path.isdir(work_dir) else []
    return configs[0] if len(configs) == 1 else os.path.basename(work_dir)


def legend_names(paths: List[str], keys: List[str]) -> List[str]:
    """One name per (log, key): the key alone for one log; with several, the run's config and
    the key, and the run's timestamp folder too where two logs share a config."""
    if len(paths) == 1:
        return list(keys)
    runs = [run_name(p) for p in paths]
    runs = [f'{r} {os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(p))))}'
            if runs.count(r) > 1 else r for r, p in zip(runs, paths)]
    return [f'{r} {k}' for r in runs for k in keys]


def plot_curve(args: argparse.Namespace) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    logs = [read_log(p) for p in args.json_logs]
    legend = args.legend or legend_names(args.json_logs, args.keys)
    if len(legend) != len(logs) * len(args.keys):
        raise SystemExit(f'--legend needs {len(logs) * len(args.keys)} names (one per log and '
                         f'key), got {len(legend)}')
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = iter(legend)
    for path, records in zip(args.json_logs, logs):
        for key in args.keys:
            steps, values = curve(records, key)
            if not values:
                held = sorted({k for r in records for k in r})
                raise SystemExit(f'{path}: no record holds {key!r}; keys: {", ".join(held)}')
            ax.plot(steps, values, marker='o' if len(values) < 30 else None, label=next(names))
    ax.set(xlabel='step (iteration; epoch for validation records)', title=args.title or '')
    ax.legend()
    fig.tight_layout()
    tmp = f'{args.out}.tmp{os.getpid()}.png'
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, args.out)
    print(f'saved: {args.out}')
    plt.close(fig)


def cal_train_time(args: argparse.Namespace) -> None:
    for path in args.json_logs:
        per_epoch: Dict[int, List[float]] = defaultdict(list)
        for record in read_log(path):
            if 'time' in record and 'epoch' in record:
                per_epoch[int(record['epoch'])].append(float(record['time']))
        if not per_epoch:
            raise SystemExit(f'{path}: no training record with "time" and "epoch"')
        means = {e: sum(t) / len(t) for e, t in per_epoch.items()}
        slowest, fastest = max(means, key=means.get), min(means, key=means.get)
        overall = sum(sum(t) for t in per_epoch.values()) / sum(map(len, per_epoch.values()))
        print(f'{path}\nslowest epoch {slowest}, mean time {means[slowest]:.4f} s/iter\n'
              f'fastest epoch {fastest}, mean time {means[fastest]:.4f} s/iter\n'
              f'mean time over the logged iterations: {overall:.4f} s/iter')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='task', required=True)
    plot = sub.add_parser('plot_curve', help='plot scalars against the step')
    plot.add_argument('json_logs', nargs='+', help='vis_data/scalars.json files')
    plot.add_argument('--keys', nargs='+', default=['loss'], help='scalars to plot')
    plot.add_argument('--legend', nargs='+', help='one name per log and key')
    plot.add_argument('--title')
    plot.add_argument('--out', required=True,
                      help='PNG to write (the curves are drawn offscreen: there is no window)')
    timing = sub.add_parser('cal_train_time', help='time per iteration')
    timing.add_argument('json_logs', nargs='+')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    {'plot_curve': plot_curve, 'cal_train_time': cal_train_time}[args.task](args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
