#!/usr/bin/env python
"""Golden of generated grasp labels judged by graspnetAPI's own per-grasp code
(tests/data/labelgen_golden/, read by tests/unit/datasets/test_labelgen_golden.py).

Two steps in two environments:

1. ``prepare`` (mmgrasp's): a synthetic box and L as meshes, their model files
   (``models/%03d/textured.{obj,sdf}``, ``nontextured.ply``: the numpy SDF backend, 4 mm) and
   their labels on a small grid (30 views x 12 angles x 4 depths), then a sample of cells - every
   feasible one of a few label points and as many infeasible ones - written as ``cells.npz``:
   per cell the object, (point, view, angle, depth), the label μ and the GraspGroup row
   (object frame) that graspnetAPI's ``loadGrasp`` would build.
2. ``judge`` (graspnetAPI's venv, see setup_graspnetapi_env.sh): each row becomes a dexnet
   grasp exactly as ``eval_utils.collision_detection`` builds one (centre = translation + depth
   along the approach, ``matrix_to_dexnet_params``), on ``load_dexnet_model(textured)``
   (``np.random.seed(0)`` before each), and ``get_grasp_score`` walks the friction coefficients
   1.0, 0.9, ..., 0.1 with ``get_config()``'s force-closure settings: the smallest μ holding,
   -1 if none. Written as ``golden.npz`` (``mu``) with the versions in ``golden.json``.

    PYTHONPATH=$PWD python tools/analysis/golden/make_labelgen_golden.py prepare \\
        tests/data/labelgen_golden
    GRASPNETAPI_VENV/bin/python tools/analysis/golden/make_labelgen_golden.py judge \\
        tests/data/labelgen_golden
"""
import argparse
import json
import os
import platform

import numpy as np

GRID = dict(num_views=30)
OBJECTS = ((0, 'box'), (1, 'lshape'))


def prepare(out: str, points_per_object: int = 4) -> None:
    from mmgrasp.datasets.labelgen import (TriangleMesh, model_points, object_grasp_labels,
                                           write_model_files)
    from mmgrasp.datasets.labelgen.object_labels import label_grasps
    from mmgrasp.datasets.synthetic.scene import make_model, model_mesh
    from mmgrasp.geometry import build_gripper, read_dexnet_sdf
    gripper = build_gripper(GRID)
    rng = np.random.default_rng(0)
    rows, cells, mus, objs = [], [], [], []
    for obj, kind in OBJECTS:
        model = make_model(0, obj, 16, kind)
        model_dir = os.path.join(out, 'models', f'{obj:03d}')
        write_model_files(TriangleMesh(*model_mesh(model)), model_dir, 0.004, 'numpy')
        sdf = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
        points = model.points[rng.choice(len(model.points), points_per_object, replace=False)]
        labels = object_grasp_labels(sdf, points, model_points(model_dir), gripper)
        np.save(os.path.join(model_dir, 'label_points.npy'), points)
        feasible = np.argwhere(labels['scores'] > 0)
        infeasible = np.argwhere(labels['scores'] <= 0)
        infeasible = infeasible[rng.choice(len(infeasible), len(feasible), replace=False)]
        chosen = np.concatenate([feasible, infeasible])
        rot = label_grasps(points[:0], gripper)[0]
        pi, vi, ai, di = chosen.T
        r = np.zeros((len(chosen), 17))
        r[:, 1] = np.where(labels['offsets'][pi, vi, ai, di, 2] > 0,
                           labels['offsets'][pi, vi, ai, di, 2], gripper.max_width)
        r[:, 2], r[:, 3] = gripper.height, gripper.depths()[di]
        r[:, 4:13] = rot[vi, ai].reshape(-1, 9)
        r[:, 13:16] = points[pi]
        rows.append(r)
        cells.append(chosen)
        mus.append(labels['scores'][pi, vi, ai, di])
        objs.append(np.full(len(chosen), obj))
    np.savez(os.path.join(out, 'cells.npz'), rows=np.concatenate(rows),
             cells=np.concatenate(cells), label_mu=np.concatenate(mus),
             object=np.concatenate(objs))


def judge_rows(model_prefix: str, rows: np.ndarray) -> np.ndarray:
    """graspnetAPI's μ of each GraspGroup row (object frame) on the dexnet model
    ``model_prefix`` (``.obj`` / ``.sdf``): the smallest of 1.0, 0.9, ..., 0.1 at which
    ``get_grasp_score`` finds force closure, -1 if none (graspnetAPI's environment only)."""
    from graspnetAPI.utils.config import get_config
    from graspnetAPI.utils.dexnet.grasping.grasp import ParallelJawPtGrasp3D
    from graspnetAPI.utils.dexnet.grasping.grasp_quality_config import \
        GraspQualityConfigFactory
    from graspnetAPI.utils.eval_utils import get_grasp_score, load_dexnet_model
    from graspnetAPI.utils.rotation import matrix_to_dexnet_params
    config = get_config()
    fc_list = np.round(np.arange(10, 0, -1) * 0.1, 1)
    fc_config = {}
    for value in fc_list:
        config['metrics']['force_closure']['friction_coef'] = value
        fc_config[value] = GraspQualityConfigFactory.create_config(
            config['metrics']['force_closure'])
    np.random.seed(0)  # dexnet's Sdf3D draws its out-of-grid surface sample
    model = load_dexnet_model(model_prefix)
    mu = np.zeros(len(rows))
    for i, row in enumerate(rows):
        rot = row[4:13].reshape(3, 3)
        centre = rot @ np.array([row[3], 0, 0]) + row[13:16]
        binormal, angle = matrix_to_dexnet_params(rot)
        grasp = ParallelJawPtGrasp3D(ParallelJawPtGrasp3D.configuration_from_params(
            centre, binormal, row[1], angle), row[3])
        mu[i] = get_grasp_score(grasp, model, fc_list, fc_config)
    return mu


def judge(out: str) -> None:
    data = np.load(os.path.join(out, 'cells.npz'))
    mu = np.zeros(len(data['rows']))
    for obj, _ in OBJECTS:
        mine = data['object'] == obj
        mu[mine] = judge_rows(os.path.join(out, 'models', f'{obj:03d}', 'textured'),
                              data['rows'][mine])
    np.savez(os.path.join(out, 'golden.npz'), mu=mu)
    import graspnetAPI
    with open(os.path.join(out, 'golden.json'), 'w') as f:
        json.dump(dict(graspnetapi=getattr(graspnetAPI, '__version__', 'bd6783c'),
                       numpy=np.__version__, python=platform.python_version(),
                       friction=np.round(np.arange(10, 0, -1) * 0.1, 1).tolist(),
                       grasps=int(len(mu)),
                       feasible_labels=int((data['label_mu'] > 0).sum())), f, indent=1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('step', choices=['prepare', 'judge'])
    p.add_argument('out')
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    prepare(a.out) if a.step == 'prepare' else judge(a.out)


if __name__ == '__main__':
    main()
