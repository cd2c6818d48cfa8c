#!/usr/bin/env python
"""Time and peak memory of labelling one object from its mesh at GraspNet-1Billion's grid
(300 x 12 x 4) and label point density, against graspnetAPI's own per-grasp code on the same
grasps (docs/notes/benchmarks/label_generation.md).

1. ``mmgrasp`` (mmgrasp's environment): the mesh of a synthetic model (``--shape``, model id
   ``--model``) through ``generate_object`` in a child process (its peak RSS from
   ``getrusage``); the SDF build and the label grids timed apart; then ``--sample`` cells drawn
   at random from the whole grid (centre inside the object or not, as a label generator must
   judge every cell) written with the object folder.
2. ``graspnetapi`` (graspnetAPI's venv): each sampled cell as graspnetAPI judges a grasp -
   dexnet's ``close_fingers`` from the open gripper (0.1 m) and ``get_grasp_score`` over the
   friction list 1.0 ... 0.1 - timed, and prorated to every cell of the object.

3. ``backends`` (mmgrasp's environment): the label backends on one object from a mesh file
   (``--mesh``, times ``--scale`` to metres; the numpy SDF written once under OUT): the numpy
   reference and ``--today`` (a copy of an earlier ``object_labels.py``, e.g. ``git show
   main:mmgrasp/datasets/labelgen/object_labels.py``) on every ``--every``-th label point,
   prorated to the object (the work is per cell), the torch backend on every point and on the
   same subset, each in a child process (wall time, peak RSS); μ and widths compared on the
   subset; then the torch path's kernel launches, host syncs and peak live bytes per million
   cells, counted on the CPU (``mmgrasp.analysis.dispatch_count``) over ``--count-points``
   points.

    PYTHONPATH=$PWD python tools/analysis/benchmark_label_generation.py mmgrasp data/bench
    GRASPNETAPI_PYTHON tools/analysis/benchmark_label_generation.py \\
        graspnetapi data/bench
    PYTHONPATH=$PWD python tools/analysis/benchmark_label_generation.py backends data/duck \\
        --mesh duck.obj --scale 0.05 --every 20 --today today_object_labels.py
"""
import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import resource
import time

import numpy as np


def _child(out, shape, model_id, voxel, backend, max_memory, queue):
    from mmgrasp.datasets.labelgen import TriangleMesh, write_model_files
    from mmgrasp.datasets.labelgen.object_labels import BYTES_PER_CELL
    from mmgrasp.datasets.labelgen.objects import generate_object
    from mmgrasp.datasets.synthetic.scene import make_model, model_mesh
    model = make_model(0, model_id, 16, shape)
    mesh = TriangleMesh(*model_mesh(model))
    t0 = time.perf_counter()
    write_model_files(mesh, os.path.join(out, 'models', f'{model_id:03d}'), sdf_backend=backend)
    t1 = time.perf_counter()
    labels = generate_object(mesh, out, model_id, voxel_size=voxel, sdf_backend=backend,
                             max_cells=int(max_memory * 2 ** 30 / BYTES_PER_CELL),
                             dexnet_sdf=os.path.join(out, 'models', f'{model_id:03d}',
                                                     'textured.sdf'))
    t2 = time.perf_counter()
    queue.put(dict(sdf_seconds=t1 - t0, label_seconds=t2 - t1,
                   points=int(len(labels['points'])), cells=int(labels['scores'].size),
                   feasible=float((labels['scores'] > 0).mean()),
                   peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def run_mmgrasp(a) -> None:
    from mmgrasp.datasets.labelgen.object_labels import label_grasps
    from mmgrasp.geometry import GRASPNET_GRIPPER
    ctx = mp.get_context('spawn')
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(a.out, a.shape, a.model, a.voxel_size, a.backend,
                                            a.max_memory, queue))
    proc.start()
    figures = queue.get()
    proc.join()
    with np.load(os.path.join(a.out, 'grasp_label', f'{a.model:03d}_labels.npz')) as z:
        points, scores = z['points'], z['scores']
    rng = np.random.default_rng(0)
    flat = rng.choice(scores.size, a.sample, replace=False)
    cells = np.stack(np.unravel_index(flat, scores.shape), 1)
    rot = label_grasps(points[:0], GRASPNET_GRIPPER)[0]
    pi, vi, ai, di = cells.T
    rows = np.zeros((len(cells), 17))
    rows[:, 1], rows[:, 2] = 0.1, 0.02
    rows[:, 3] = GRASPNET_GRIPPER.depths()[di]
    rows[:, 4:13] = rot[vi, ai].reshape(-1, 9)
    rows[:, 13:16] = points[pi]
    np.savez(os.path.join(a.out, 'sample.npz'), rows=rows, model=a.model)
    figures.update(shape=a.shape, model=a.model, voxel_size=a.voxel_size, backend=a.backend,
                   seconds_per_cell_us=1e6 * figures['label_seconds'] / figures['cells'])
    with open(os.path.join(a.out, 'mmgrasp.json'), 'w') as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures, indent=1))


def run_graspnetapi(a) -> None:
    spec = importlib.util.spec_from_file_location('make_labelgen_golden', os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'golden', 'make_labelgen_golden.py'))
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    data = np.load(os.path.join(a.out, 'sample.npz'))
    t0 = time.perf_counter()
    golden.judge_rows(os.path.join(a.out, 'models', f'{int(data["model"]):03d}', 'textured'),
                      data['rows'])
    seconds = time.perf_counter() - t0
    with open(os.path.join(a.out, 'mmgrasp.json')) as f:
        ours = json.load(f)
    per_grasp = seconds / len(data['rows'])
    figures = dict(sampled_grasps=int(len(data['rows'])), seconds=seconds,
                   seconds_per_grasp_ms=1e3 * per_grasp,
                   object_seconds_prorated=per_grasp * ours['cells'],
                   ratio_graspnetapi_over_mmgrasp=per_grasp * ours['cells'] /
                   ours['label_seconds'])
    with open(os.path.join(a.out, 'graspnetapi.json'), 'w') as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures, indent=1))


def _backend_child(out, backend, every, threads, today, queue):
    torch = importlib.import_module('torch')
    torch.set_num_threads(threads)
    from mmgrasp.datasets.labelgen import model_points, object_grasp_labels
    from mmgrasp.geometry import GRASPNET_GRIPPER, read_dexnet_sdf
    model_dir = os.path.join(out, 'models', '000')
    sdf = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
    points = np.load(os.path.join(out, 'label_points.npy'))[::every]
    run = object_grasp_labels
    kwargs = dict(backend=backend, device='cpu')
    if today:
        spec = importlib.util.spec_from_file_location('mmgrasp.datasets.labelgen._today', today)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kwargs = {}
        if hasattr(module, 'batched_object_grasp_labels'):  # an earlier batched.py
            from mmgrasp.datasets.synthetic.labels import JAW_CLEARANCE

            def run(*args):
                return module.batched_object_grasp_labels(*args, JAW_CLEARANCE, 200_000, None,
                                                          'cpu')
        else:
            run = module.object_grasp_labels
    t0 = time.perf_counter()
    labels = run(sdf, points, model_points(model_dir), GRASPNET_GRIPPER, **kwargs)
    seconds = time.perf_counter() - t0
    np.savez(os.path.join(out, _key(backend, every, today) + '.npz'),
             scores=labels['scores'], width=labels['offsets'][..., 2],
             collision=labels['collision'])
    queue.put(dict(seconds=seconds, points=int(len(points)), cells=int(labels['scores'].size),
                   feasible=float((labels['scores'] > 0).mean()),
                   peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def _key(backend, every, today):
    """a run's name: the backend and ``every``, and an earlier module's file name"""
    stem = os.path.splitext(os.path.basename(today))[0] if today else ''
    return f'{backend}_{every}' + (f'_today_{stem}' if today else '')


def _spawn(*args):
    ctx = mp.get_context('spawn')
    queue = ctx.Queue()
    proc = ctx.Process(target=_backend_child, args=args + (queue, ))
    proc.start()
    figures = queue.get()
    proc.join()
    print(json.dumps(dict(args=[str(a) for a in args[1:]], **figures)), flush=True)
    return figures


def _count_torch(out, points: int) -> dict:
    """Launches, syncs and peak live bytes of the torch backend on the first ``points`` label
    points, per million cells (what a CUDA device would launch: each aten op reaching a
    kernel, counted on the CPU)."""
    import torch
    from mmgrasp.analysis.dispatch_count import count_events, peak_bytes
    from mmgrasp.datasets.labelgen import model_points, object_grasp_labels
    from mmgrasp.geometry import GRASPNET_GRIPPER, read_dexnet_sdf
    model_dir = os.path.join(out, 'models', '000')
    sdf = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
    pts = np.load(os.path.join(out, 'label_points.npy'))
    pts = pts[np.linspace(0, len(pts) - 1, points).astype(int)]
    model = model_points(model_dir)

    def run():
        return object_grasp_labels(sdf, pts, model, GRASPNET_GRIPPER, backend='torch',
                                    device='cpu')
    cells = len(pts) * 300 * 12 * 4
    from mmgrasp.datasets.labelgen import batched
    batched.LOOKUP_BLOCK = None  # a CUDA device looks every point up at once
    batched.HOST_CHECKS = False  # and computes the off-grid stand-in without a host check
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    parts = count_events(prof.events())
    launches = sum(p['launches'] for p in parts.values())
    syncs = sum(p['syncs'] for p in parts.values())
    peak = peak_bytes(run, torch.device('cpu'), [])['peak']
    return dict(count_points=len(pts), cells=cells, launches=launches, syncs=syncs,
                peak_live_bytes=peak, launches_per_million_cells=launches * 1e6 / cells,
                syncs_per_million_cells=syncs * 1e6 / cells,
                peak_bytes_per_million_cells=peak * 1e6 / cells)


def run_backends(a) -> None:
    from mmgrasp.datasets.labelgen import TriangleMesh, label_points, read_mesh, write_model_files
    model_dir = os.path.join(a.out, 'models', '000')
    mesh = read_mesh(a.mesh)
    mesh = TriangleMesh(mesh.vertices * a.scale, mesh.faces)
    if not os.path.isfile(os.path.join(model_dir, 'textured.sdf')):
        write_model_files(mesh, model_dir, sdf_backend='numpy')
    points = label_points(mesh, a.voxel_size)
    np.save(os.path.join(a.out, 'label_points.npy'), points)
    print(json.dumps(dict(mesh=a.mesh, scale=a.scale, points=len(points),
                          cells=len(points) * 14400, load=os.getloadavg())), flush=True)
    figures = dict(points=int(len(points)), cells=int(len(points) * 14400),
                   load_before=os.getloadavg())
    runs = [('torch', a.every, a.threads, None), ('numpy', a.every, 1, None)]
    for today in a.today or []:
        runs.append(('earlier', a.every, 1, today))
    if a.full:
        runs.append(('torch', 1, a.threads, None))
    for backend, every, threads, today in runs:
        key = _key(backend, every, today)
        figures[key] = _spawn(a.out, backend, every, threads, today)
        figures[key]['prorated_seconds'] = figures[key]['seconds'] * figures['cells'] / \
            figures[key]['cells']
    sub = {k: np.load(os.path.join(a.out, f'{k}.npz')) for k in (f'numpy_{a.every}',
                                                                 f'torch_{a.every}')}
    ref, new = sub[f'numpy_{a.every}'], sub[f'torch_{a.every}']
    figures['subset_differ'] = dict(mu=int((ref['scores'] != new['scores']).sum()),
                                    width=int((ref['width'] != new['width']).sum()),
                                    collision=int((ref['collision'] != new['collision']).sum()))
    for today in a.today or []:  # the earlier paths' labels against the reference's
        key = _key('earlier', a.every, today)
        old = np.load(os.path.join(a.out, f'{key}.npz'))
        figures[f'{key}_differ'] = dict(
            mu=int((ref['scores'] != old['scores']).sum()),
            width=int((ref['width'] != old['width']).sum()),
            width_max_abs=float(np.abs(ref['width'] - old['width']).max()))
    if a.full:
        full = np.load(os.path.join(a.out, 'torch_1.npz'))
        figures['full_vs_subset_differ'] = int((full['scores'][::a.every] !=
                                                ref['scores']).sum())
    figures['load_after'] = os.getloadavg()
    if a.count_points:
        figures['torch_counts'] = _count_torch(a.out, a.count_points)
    with open(os.path.join(a.out, 'backends.json'), 'w') as f:
        json.dump(figures, f, indent=1)
    print(json.dumps(figures, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('step', choices=['mmgrasp', 'graspnetapi', 'backends'])
    p.add_argument('out')
    p.add_argument('--shape', default='cylinder')
    p.add_argument('--model', type=int, default=2)
    p.add_argument('--voxel-size', type=float, default=0.005)
    p.add_argument('--backend', default='numpy', choices=['numpy', 'open3d'])
    p.add_argument('--max-memory', type=float, default=1.0, help='GiB')
    p.add_argument('--sample', type=int, default=2000, help='cells graspnetAPI judges')
    p.add_argument('--mesh', help='backends: a mesh file (OBJ or PLY)')
    p.add_argument('--scale', type=float, default=1.0, help='backends: mesh units to metres')
    p.add_argument('--every', type=int, default=20,
                   help='backends: the numpy paths label every n-th point')
    p.add_argument('--threads', type=int, default=1,
                   help='backends: torch threads (1 on a shared machine: idle threads spin)')
    p.add_argument('--today', nargs='+',
                   help='backends: earlier object_labels.py or batched.py copies to time as '
                   'well (a batched.py on the CPU, as the torch backend)')
    p.add_argument('--full', action='store_true',
                   help='backends: the torch backend on every point as well')
    p.add_argument('--count-points', type=int, default=2,
                   help='backends: label points of the launch count (0: none)')
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    dict(mmgrasp=run_mmgrasp, graspnetapi=run_graspnetapi, backends=run_backends)[a.step](a)


if __name__ == '__main__':
    main()
