"""Evaluation speed: mmgrasp's GraspNet evaluator against graspnetAPI on the same frames, one run.

    python tools/analysis/benchmark_eval.py [--models curved] [--camera kinect] [--frames 8] \
        [--nproc 1 2] [--steps] [--scene-cost] [--graspnetapi-python GRASPNETAPI_VENV/bin/python] \
        [--json OUT]

Without ``--root`` it writes a golden dataset's recipe (tests/data/eval_golden/README.md:
3 test scenes, 5 objects; ``--models boxes`` the box set, ``curved`` the curved sets'
cylinder, sphere, capsule, torus, L-shaped plate and box in ASCII and binary PLY) with
``--frames`` frames a scene into a temporary folder, and the gt, random and shifted dumps of
tools/analysis/golden/make_golden_dumps.py; ``--root DIR --dump NAME=DIR ...`` measures given
dumps instead.

For every dump: mmgrasp's ``evaluate_dump`` (GraspNetMetric's engine) at each ``--nproc``
(best wall time of ``--repeat`` runs; CPU time of that run, its processes included) and, with
``--graspnetapi-python``, graspnetAPI's ``eval_scene`` loop in that interpreter (through
tools/analysis/golden/make_eval_golden.py, one process). Every measurement covers the whole
evaluation, scene models (PLY, SDF) read cold; BLAS/OpenMP run one thread on both sides.
Prints a markdown table: frames/s, CPU ms per frame, the speed-up over graspnetAPI on one core,
the wall-time scaling over one process, the AP both sides computed, and the load average;
then, per dump, the whole test protocol (90 scenes x 256 frames) projected from the measured
CPU time a frame at the most processes: CPU minutes, and wall minutes with that many
processes scaling as the machine's ceiling (below) allows.
Beside each scaling, the machine's ceiling measured in the same run: ``p`` forked copies of the
dump's frames evaluated in memory (nothing read, nothing shared) against one copy; on a
machine whose cores are shared or throttled it is below ``p``, and no split of the evaluation
can beat it.
``--steps`` adds, per dump, the CPU time a frame of each step of mmgrasp's evaluation on one
core with the scene models already read (best of ``--repeat``): which part is fixed per frame
and which grows with the grasps that reach the collision and force-closure tests.
``--scene-cost`` measures both sides again with the first frame of every scene only and
separates, on one core, what a scene costs (reading and sampling its models) from what a frame
costs: a frame = (CPU at F frames a scene - CPU at 1) / (S (F - 1)), a scene = CPU at 1 / S -
a frame. Both are differences of two runs, so they move with the machine between the runs.
It prints the ratio a frame, the ratio at the protocol's 256 frames a scene (the scene's cost
spread over them), and the whole protocol projected from the scene and frame costs.
"""
import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')  # one core means one thread; set before numpy loads

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import mmgrasp.evaluation.functional.frame_eval as frame_eval  # noqa: E402
import mmgrasp.evaluation.graspnet_dump_eval as ge  # noqa: E402
from mmgrasp.geometry import PosedTable  # noqa: E402
from mmgrasp.evaluation.graspnet_dump_eval import (clear_asset_caches, evaluate_dump,  # noqa: E402
                                              summarize)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DATASET = ['--scenes', '1', '--objects', '5', '--points-per-object', '40', '--grid', '6',
                  '3', '2', '--image-size', '320', '180', '--test-scenes', '100', '130', '160',
                  '--quiet']
MODELS = {'boxes': [], 'curved': ['--shapes', 'cylinder', 'sphere', 'capsule', 'torus', 'lshape',
                                  'box', '--ply-formats', 'ascii', 'binary']}
GOLDEN_SCENES = [100, 130, 160]
PROTOCOL_SCENES, PROTOCOL_FRAMES_PER_SCENE = 90, 256  # test scenes 100-189, 256 frames each
FULL_PROTOCOL_FRAMES = PROTOCOL_SCENES * PROTOCOL_FRAMES_PER_SCENE


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--root', help='dataset root (default: write the golden recipe)')
    p.add_argument('--dump', action='append', metavar='NAME=DIR',
                   help='with --root: dumps to measure (default: gt, random, shifted written)')
    p.add_argument('--camera', default='realsense')
    p.add_argument('--models', choices=sorted(MODELS), default='boxes',
                   help='which golden recipe to write (without --root)')
    p.add_argument('--scenes', type=int, nargs='+', default=GOLDEN_SCENES)
    p.add_argument('--frames', type=int, default=8, help='frames 0..F-1 of every scene')
    p.add_argument('--nproc', type=int, nargs='+', default=[1, 2])
    p.add_argument('--repeat', type=int, default=3, help='mmgrasp runs per figure (best wall)')
    p.add_argument('--seed', type=int, default=0, help='dexnet surface-sample seed (both sides)')
    p.add_argument('--graspnetapi-python', help="python of graspnetAPI's environment")
    p.add_argument('--steps', action='store_true',
                   help="also time each step of mmgrasp's evaluation (one core, models read)")
    p.add_argument('--scene-cost', action='store_true',
                   help='also run 1 frame a scene and separate a scene\'s cost from a frame\'s '
                        '(one core, both sides)')
    p.add_argument('--json')
    args = p.parse_args(argv)
    if (args.root is None) != (args.dump is None):
        p.error('--root and --dump go together (neither: the golden recipe is written)')
    if args.scene_cost and args.frames < 2:
        p.error('--scene-cost compares --frames F with 1 frame a scene: F must be at least 2')
    return args


def write_golden_inputs(work: str, scenes, frames: int, camera: str,
                        models: str = 'boxes') -> tuple:
    """A golden recipe's dataset with ``frames`` frames and its gt/random/shifted dumps."""
    root, dumps = os.path.join(work, 'synthetic'), os.path.join(work, 'dumps')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        REPO, os.environ.get('PYTHONPATH')])))
    subprocess.run([sys.executable, os.path.join(REPO, 'tools', 'data', 'make_synthetic.py'),
                    root, '--frames', str(frames), '--cameras', camera, *GOLDEN_DATASET,
                    *MODELS[models]], check=True, env=env)
    subprocess.run([sys.executable, os.path.join(REPO, 'tools', 'analysis', 'golden',
                                                 'make_golden_dumps.py'), root, dumps,
                    '--camera', camera, '--scenes', *map(str, scenes), '--frames', str(frames)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return root, {n: os.path.join(dumps, n) for n in ('gt', 'random', 'shifted')}


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the evaluation processes)."""
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                       resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_mmgrasp(root, dump, camera, scenes, frames, seed, nproc, repeat) -> dict:
    """Best wall time of ``repeat`` cold evaluations, that run's CPU time and the AP."""
    best = None
    for _ in range(repeat):
        clear_asset_caches()  # forked workers would inherit warm caches
        with tempfile.TemporaryDirectory() as results:
            load = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), _cpu_seconds()
            acc = evaluate_dump(root, dump, camera, scenes,
                                {s: list(range(frames)) for s in scenes}, nproc=nproc,
                                results_dir=results, progress=False, sdf_sample_seed=seed)
            wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
        if best is None or wall < best['wall_s']:
            best = dict(wall_s=wall, cpu_s=cpu, ap=summarize(acc)['AP'], load_1min=load)
    return best


def time_graspnetapi(python, root, dumps, camera, scenes, frames, seed):
    with tempfile.TemporaryDirectory() as out:
        cmd = [python, os.path.join(REPO, 'tools', 'analysis', 'golden', 'make_eval_golden.py'),
               root, out, '--camera', camera, '--scenes', *map(str, scenes), '--frames',
               str(frames), '--seed', str(seed)]
        for name, d in dumps.items():
            cmd += ['--dump', f'{name}={d}']
        env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1',
                   MKL_NUM_THREADS='1', PYTHONPATH='')
        load = os.getloadavg()[0]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, 'timing_graspnetapi.json')) as f:
            timing = json.load(f)['dumps']
        with open(os.path.join(out, 'golden.json')) as f:
            ap = {k: v['AP'] for k, v in json.load(f)['dumps'].items()}
    return {k: dict(v, ap=ap[k], load_1min=load) for k, v in timing.items()}


def _in_memory_frames(root, dump, camera, scenes, frames, seed) -> list:
    """Every scene's batches of evaluate_frames arguments, read once (models, SDFs, poses,
    grasps)."""
    job = []
    for s in scenes:
        inputs = ge.SceneInputs(root, camera, s, seed)
        args = [inputs.frame(dump, f) for f in range(frames)]
        job += [args[i:i + ge.FRAME_BATCH] for i in range(0, frames, ge.FRAME_BATCH)]
    return job


def _run_copies(job: list, copies: int) -> float:
    """Wall time of ``copies`` forked processes each evaluating every frame of ``job``."""
    def work():
        for batch in job:
            ge.evaluate_frames(batch)
        os._exit(0)
    start = time.perf_counter()
    pids = []
    for _ in range(copies):
        pid = os.fork()
        if pid == 0:
            work()
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return time.perf_counter() - start


def machine_ceiling(job: list, nproc: int, repeat: int) -> float:
    """How much more work ``nproc`` processes do than one on this machine now: ``nproc``
    copies of an in-memory evaluation (no reads, no coordination) against one copy, best of
    ``repeat``. No way of splitting the evaluation can scale better than this."""
    one = min(_run_copies(job, 1) for _ in range(repeat))
    many = min(_run_copies(job, nproc) for _ in range(repeat))
    return nproc * one / many


# the steps of evaluate_frames that --steps times, as frame_eval names them
STEPS = {'collision test in the workspaces (gripper_contacts)': 'gripper_contacts',
         'force-closure test (grasps_friction)': 'grasps_friction',
         'grasp NMS (grasp_nms)': 'grasp_nms',
         'grasp to object (nearest_indices)': 'nearest_indices',
         'models posed (transform_points)': 'transform_points',
         'score sorts (legacy_numpy_argsort)': 'legacy_numpy_argsort'}
TABLE_STEP = 'table near the objects (PosedTable.inside)'


def step_times(root, dump, camera, scenes, frames, seed, repeat) -> dict:
    """CPU seconds of each step of ``frames`` frames a scene on one core, scene models read
    beforehand (best total of ``repeat``): 'frame inputs' (dump, annotation, table pose), the
    :data:`STEPS` and the posed table (a nested call counts in the outer step only), 'rest'
    (selection and per-object bookkeeping) and 'total'."""
    spent, depth = {}, [0]

    def timed(name, fn):
        def wrapper(*a, **k):
            depth[0] += 1
            start = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[name] = spent.get(name, 0.0) + time.process_time() - start
        return wrapper
    scene_inputs = [ge.SceneInputs(root, camera, s, seed) for s in scenes]
    saved = {attr: getattr(frame_eval, attr) for attr in STEPS.values()}
    inside = PosedTable.inside
    best = None
    try:
        for name, attr in STEPS.items():
            setattr(frame_eval, attr, timed(name, saved[attr]))
        PosedTable.inside = timed(TABLE_STEP, inside)
        for _ in range(repeat):
            spent.clear()
            start = time.process_time()
            batches = []
            for inputs in scene_inputs:
                args = [inputs.frame(dump, f) for f in range(frames)]
                batches += [args[i:i + ge.FRAME_BATCH] for i in range(0, frames, ge.FRAME_BATCH)]
            read = time.process_time()
            for batch in batches:
                frame_eval.evaluate_frames(batch)
            end = time.process_time()
            if best is None or end - start < best['total']:
                best = dict(spent, total=end - start)
                best['frame inputs'] = read - start
                best['rest'] = end - read - sum(spent.values())
    finally:
        for attr, fn in saved.items():
            setattr(frame_eval, attr, fn)
        PosedTable.inside = inside
    return best


def steps_table(report: dict) -> str:
    """CPU ms a frame of every step (rows) for every dump (columns)."""
    names = ['frame inputs', *STEPS, TABLE_STEP, 'rest', 'total']
    lines = ['| step (CPU ms/frame, 1 proc, models read) | ' + ' | '.join(report) + ' |',
             '|---|' + '---:|' * len(report)]
    for name in names:
        cells = [f"{1e3 * e['steps'].get(name, 0.0) / e['frames']:.2f}" for e in report.values()]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def measure(args, root, dumps) -> dict:
    n = len(args.scenes) * args.frames
    api = {}
    if args.graspnetapi_python:
        api = time_graspnetapi(args.graspnetapi_python, root, dumps, args.camera, args.scenes,
                               args.frames, args.seed)
    report = {}
    for name, dump in dumps.items():
        runs = {p: time_mmgrasp(root, dump, args.camera, args.scenes, args.frames, args.seed, p,
                                args.repeat) for p in args.nproc}
        entry = dict(frames=n, mmgrasp={str(p): dict(r, frames_per_s=n / r['wall_s'],
                                                     cpu_ms_per_frame=1e3 * r['cpu_s'] / n)
                                        for p, r in runs.items()})
        if name in api:
            entry['graspnetapi'] = dict(api[name], cpu_ms_per_frame=1e3 * api[name]['cpu_s'] / n)
        entry['machine_ceiling'] = {}
        more = [p for p in args.nproc if p != min(args.nproc)]
        if more:  # the frames are read into memory only for a ceiling to measure
            job = _in_memory_frames(root, dump, args.camera, args.scenes, args.frames, args.seed)
            entry['machine_ceiling'] = {str(p): machine_ceiling(job, p, args.repeat)
                                        for p in more}
        if args.steps:
            entry['steps'] = step_times(root, dump, args.camera, args.scenes, args.frames,
                                        args.seed, args.repeat)
        report[name] = entry
    return report


def table(report: dict, nprocs) -> str:
    base = min(nprocs)
    head = ['dump', 'frames', 'graspnetAPI CPU ms/frame', 'AP graspnetAPI']
    for p in nprocs:
        head += [f'mmgrasp {p} proc: frames/s', 'CPU ms/frame', 'AP', 'load']
        if p != base:
            head += [f'scaling {p}/{base} proc', 'machine ceiling']
    head.append(f'speed-up over graspnetAPI (CPU, {base} proc)')
    lines = ['| ' + ' | '.join(head) + ' |', '|---|' + '---:|' * (len(head) - 1)]
    for name, e in report.items():
        api = e.get('graspnetapi')
        cells = [name, str(e['frames']),
                 f"{api['cpu_ms_per_frame']:.0f}" if api else 'n/a',
                 f"{api['ap']:.2f}" if api else 'n/a']
        for p in nprocs:
            r = e['mmgrasp'][str(p)]
            cells += [f"{r['frames_per_s']:.2f}", f"{r['cpu_ms_per_frame']:.0f}",
                      f"{r['ap']:.2f}", f"{r['load_1min']:.2f}"]
            if p != base:
                cells += [f"{r['frames_per_s'] / e['mmgrasp'][str(base)]['frames_per_s']:.2f}x",
                          f"{e['machine_ceiling'][str(p)]:.2f}x"]
        cells.append(f"{api['cpu_ms_per_frame'] / e['mmgrasp'][str(base)]['cpu_ms_per_frame']:.1f}x"
                     if api else 'n/a')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def projection(report: dict, nprocs) -> str:
    """The whole test protocol projected from each dump's CPU time a frame at the most
    processes: CPU minutes, and wall minutes on that many processes at the machine's
    ceiling measured in the same run (one process: the CPU time)."""
    top = max(nprocs)
    lines = [f'| dump | CPU ms/frame ({top} proc) | full protocol ({FULL_PROTOCOL_FRAMES} '
             f'frames): CPU min | wall min, {top} proc at the measured ceiling |',
             '|---|---:|---:|---:|']
    for name, e in report.items():
        cpu_ms = e['mmgrasp'][str(top)]['cpu_ms_per_frame']
        cpu_min = FULL_PROTOCOL_FRAMES * cpu_ms / 6e4
        ceiling = e['machine_ceiling'].get(str(top), 1.0)
        e['full_protocol'] = dict(cpu_min=cpu_min, wall_min=cpu_min / ceiling, nproc=top)
        lines.append(f'| {name} | {cpu_ms:.1f} | {cpu_min:.1f} | {cpu_min / ceiling:.1f} |')
    return '\n'.join(lines)


def scene_and_frame_costs(args, root, dumps, report: dict) -> None:
    """``--scene-cost``: every dump measured again with the first frame of each scene, and
    ``scene_and_frame`` added to its entry: CPU ms a scene and a frame of each side (mmgrasp at
    the fewest processes) and the whole protocol projected from mmgrasp's."""
    base = min(args.nproc)
    once = measure(argparse.Namespace(**dict(vars(args), frames=1, steps=False, nproc=[base])),
                   root, dumps)
    scenes, frames = len(args.scenes), args.frames
    for name, entry in report.items():
        runs = {'mmgrasp': (entry['mmgrasp'][str(base)], once[name]['mmgrasp'][str(base)])}
        if 'graspnetapi' in entry:
            runs['graspnetapi'] = (entry['graspnetapi'], once[name]['graspnetapi'])
        costs = {}
        for side, (many, one) in runs.items():
            frame = (many['cpu_s'] - one['cpu_s']) / (scenes * (frames - 1))
            costs[side] = dict(scene_ms=1e3 * (one['cpu_s'] / scenes - frame),
                               frame_ms=1e3 * frame)
        mm = costs['mmgrasp']
        costs['protocol_cpu_min'] = (PROTOCOL_SCENES * mm['scene_ms']
                                     + FULL_PROTOCOL_FRAMES * mm['frame_ms']) / 6e4
        entry['scene_and_frame'] = dict(costs, nproc=base)


def _per_protocol_scene(cost: dict) -> float:
    """CPU ms a frame in a scene of the protocol's 256 frames, the scene's own cost spread."""
    return cost['scene_ms'] / PROTOCOL_FRAMES_PER_SCENE + cost['frame_ms']


def _ratio(mine: float, theirs: float) -> str:
    return f'1/{theirs / mine:.0f}' if mine > 0 and theirs > 0 else 'n/a'


def scene_cost_table(report: dict) -> str:
    """A scene's and a frame's CPU on both sides, the ratios and the projected protocol."""
    p = next(iter(report.values()))['scene_and_frame']['nproc']
    lines = ['| dump | graspnetAPI: CPU ms a scene | a frame | '
             f'mmgrasp ({p} proc): CPU ms a scene | a frame | ratio a frame | ratio at '
             f'{PROTOCOL_FRAMES_PER_SCENE} frames a scene | 1/100 of graspnetAPI\'s frame (ms) | '
             f'full protocol ({PROTOCOL_SCENES} x {PROTOCOL_FRAMES_PER_SCENE} frames): '
             'mmgrasp CPU min |', '|---|' + '---:|' * 8]
    for name, e in report.items():
        c = e['scene_and_frame']
        mm, api = c['mmgrasp'], c.get('graspnetapi')
        cells = [name, *([f"{api['scene_ms']:.1f}", f"{api['frame_ms']:.2f}"] if api
                         else ['n/a', 'n/a']),
                 f"{mm['scene_ms']:.1f}", f"{mm['frame_ms']:.2f}"]
        if api:
            cells += [_ratio(mm['frame_ms'], api['frame_ms']),
                      _ratio(_per_protocol_scene(mm), _per_protocol_scene(api)),
                      f"{api['frame_ms'] / 100:.2f}"]
        else:
            cells += ['n/a'] * 3
        cells.append(f"{c['protocol_cpu_min']:.2f}")
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def main(argv=None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        if args.root is None:
            root, dumps = write_golden_inputs(work, args.scenes, args.frames, args.camera,
                                              args.models)
        else:
            root, dumps = args.root, dict(d.split('=', 1) for d in args.dump)
        report = measure(args, root, dumps)
        if args.scene_cost:
            scene_and_frame_costs(args, root, dumps, report)
    print(f'{os.cpu_count()} CPUs; load average (1, 5, 15 min) at the end: '
          f'{", ".join(f"{v:.2f}" for v in os.getloadavg())}; "load" = 1-min load average when '
          'the best run started')
    print(table(report, args.nproc))
    print(projection(report, args.nproc))
    if args.steps:
        print(steps_table(report))
    if args.scene_cost:
        print(scene_cost_table(report))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == '__main__':
    sys.exit(0 if main() else 1)
