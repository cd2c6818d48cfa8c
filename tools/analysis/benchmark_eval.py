"""Evaluation speed: mmgrasp's GraspNet evaluator against graspnetAPI on the same frames, one run.

    python tools/analysis/benchmark_eval.py DATA_ROOT --dump gt=DIR [--dump random=DIR ...] \
        --scenes 100 130 160 --frames 2 [--graspnetapi-python /work/gnapi-venv/bin/python] \
        [--json OUT]

For every dump: mmgrasp in one process (CPU and wall time), mmgrasp in two processes (wall), and,
with ``--graspnetapi-python``, graspnetAPI's ``eval_scene`` loop in that interpreter (through
tools/analysis/golden/make_eval_golden.py, one process, OMP_NUM_THREADS=1). Each measurement
covers the whole evaluation of the frames, scene models included; per-scene results are not
reused (fresh result folders). Prints a markdown table of frames/s and the ratios.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from mmgrasp.evaluation.graspnet_eval import evaluate_dump, summarize

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root')
    p.add_argument('--dump', action='append', required=True, metavar='NAME=DIR')
    p.add_argument('--camera', default='realsense')
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True)
    p.add_argument('--seed', type=int, default=0, help='dexnet surface-sample seed (both sides)')
    p.add_argument('--graspnetapi-python', help="python of graspnetAPI's environment")
    p.add_argument('--json')
    return p.parse_args(argv)


def time_mmgrasp(root, dump, camera, scenes, frames, seed, nproc):
    with tempfile.TemporaryDirectory() as results:
        wall, cpu = time.perf_counter(), time.process_time()
        acc = evaluate_dump(root, dump, camera, scenes, {s: list(range(frames)) for s in scenes},
                            nproc=nproc, results_dir=results, progress=False,
                            sdf_sample_seed=seed)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, summarize(acc)['AP']


def time_graspnetapi(python, root, dumps, camera, scenes, frames, seed):
    with tempfile.TemporaryDirectory() as out:
        cmd = [python, os.path.join(REPO, 'tools', 'analysis', 'golden', 'make_eval_golden.py'),
               root, out, '--camera', camera, '--scenes', *map(str, scenes), '--frames',
               str(frames), '--seed', str(seed)]
        for name, d in dumps.items():
            cmd += ['--dump', f'{name}={d}']
        env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH='')
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, 'timing_graspnetapi.json')) as f:
            timing = json.load(f)['dumps']
        with open(os.path.join(out, 'golden.json')) as f:
            ap = {k: v['AP'] for k, v in json.load(f)['dumps'].items()}
    return timing, ap


def main(argv=None):
    args = parse_args(argv)
    dumps = dict(d.split('=', 1) for d in args.dump)
    n = len(args.scenes) * args.frames
    api, api_ap = ({}, {})
    if args.graspnetapi_python:
        api, api_ap = time_graspnetapi(args.graspnetapi_python, args.root, dumps, args.camera,
                                       args.scenes, args.frames, args.seed)
    rows, report = [], {}
    for name, dump in dumps.items():
        wall1, cpu1, ap = time_mmgrasp(args.root, dump, args.camera, args.scenes, args.frames,
                                       args.seed, 1)
        wall2, _, _ = time_mmgrasp(args.root, dump, args.camera, args.scenes, args.frames,
                                   args.seed, 2)
        entry = dict(frames=n, mmgrasp_cpu_fps=n / cpu1, mmgrasp_wall_fps_1proc=n / wall1,
                     mmgrasp_wall_fps_2proc=n / wall2, mmgrasp_ap=ap)
        if name in api:
            entry.update(graspnetapi_cpu_fps=api[name]['frames_per_s_cpu'],
                         graspnetapi_wall_fps=api[name]['frames_per_s_wall'],
                         graspnetapi_ap=api_ap[name],
                         cpu_speedup=(n / cpu1) / api[name]['frames_per_s_cpu'])
        report[name] = entry
        api_cell = (f"{entry['graspnetapi_cpu_fps']:.2f} | {entry['cpu_speedup']:.1f}x"
                    if name in api else 'n/a | n/a')
        rows.append(f"| {name} | {n} | {entry['mmgrasp_cpu_fps']:.2f} | {api_cell} | "
                    f"{entry['mmgrasp_wall_fps_1proc']:.2f} | {entry['mmgrasp_wall_fps_2proc']:.2f}"
                    f" | {ap:.2f} | {entry.get('graspnetapi_ap', float('nan')):.2f} |")
    print('| dump | frames | mmgrasp frames/s (CPU, 1 proc) | graspnetAPI frames/s (CPU, 1 proc) '
          '| speed-up | mmgrasp frames/s wall, 1 proc | wall, 2 procs | AP mmgrasp | '
          'AP graspnetAPI |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    print('\n'.join(rows))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
