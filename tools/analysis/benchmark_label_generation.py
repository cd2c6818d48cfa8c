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

    PYTHONPATH=$PWD python tools/analysis/benchmark_label_generation.py mmgrasp /tmp/bench
    /work/venvs/graspnetapi/bin/python tools/analysis/benchmark_label_generation.py \\
        graspnetapi /tmp/bench
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


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('step', choices=['mmgrasp', 'graspnetapi'])
    p.add_argument('out')
    p.add_argument('--shape', default='cylinder')
    p.add_argument('--model', type=int, default=2)
    p.add_argument('--voxel-size', type=float, default=0.005)
    p.add_argument('--backend', default='numpy', choices=['numpy', 'open3d'])
    p.add_argument('--max-memory', type=float, default=1.0, help='GiB')
    p.add_argument('--sample', type=int, default=2000, help='cells graspnetAPI judges')
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    run_mmgrasp(a) if a.step == 'mmgrasp' else run_graspnetapi(a)


if __name__ == '__main__':
    main()
