#!/usr/bin/env python
"""Golden AP by grasp width: Scale-Balanced-Grasp's ``evaluate_scale.py`` protocol, re-typed
here as the graspnetAPI calls it makes, for mmgrasp's scale-split AP to reproduce. SBG's script
itself is not run; what it does was read from its source at @5904d5f.

Runs ONLY in graspnetAPI's own environment (setup_graspnetapi_env.sh; numpy 1.23.4).

SBG's ``evaluate_scale.py`` (mahaoxiang822/Scale-Balanced-Grasp @5904d5f; FineGrasp's
``GraspNetEvalScale`` is the same) evaluates a dump three times. Per frame, as graspnetAPI's
``eval_scene``: widths clipped to [0, 0.1], then only the grasps of one size are kept - small
w < 0.04, medium 0.04 <= w < 0.07, large w >= 0.07 - and its own ``eval_grasp`` runs on them.
That ``eval_grasp`` is graspnetAPI's with two changes: the **5** best grasps per object (not
10) and, when no grasp is left, empty lists instead of an IndexError; the score cut stays at
rank 50. Its ``eval_scene`` defaults to ``TOP_K=20`` and ``parallel_eval_scenes`` calls it
without one, so every frame gives a **(20, 6)** precision array; AP is its mean.

:func:`sbg_eval_grasp` below is that sequence of graspnetAPI calls (GraspGroup.nms,
compute_closest_points, sort_by_score, collision_detection, get_grasp_score), written here;
the frame loop is make_eval_golden.py's with the width filter, so the departures listed there
(frames 0..F-1 of the given scenes, ``np.random.seed`` before each scene's dexnet models)
hold here too.

Writes into OUT: ``<dump>_<size>.npz`` (``accuracy`` (S, F, 20, 6) and per frame the kept
grasps / friction scores / collision-or-empty masks, as make_eval_golden.py) and
``golden_scale.json`` (AP, AP0.8, AP0.4 per dump, size and split).

    python tools/analysis/golden/make_scale_golden.py DATA_ROOT OUT --camera realsense \
        --scenes 100 130 160 --frames 2 --dump gt=DUMPS/gt --dump random=DUMPS/random
"""
import argparse
import json
import os
import platform
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_eval_golden import SPLITS, _graspnetapi_version, _OutOfBoundsCounter  # noqa: E402

FRICTION = [0.2, 0.4, 0.6, 0.8, 1.0, 1.2]
TOP_K = 20  # SBG's eval_scene default, what parallel_eval_scenes uses
PER_OBJECT = 5
CUT_RANK = 50  # eval_grasp's remain_mask[min(49, ...)]
MAX_WIDTH = 0.1
SIZES = {'small': (-np.inf, 0.04), 'medium': (0.04, 0.07), 'large': (0.07, np.inf)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root')
    p.add_argument('out')
    p.add_argument('--camera', default='realsense')
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True)
    p.add_argument('--dump', action='append', required=True, metavar='NAME=DIR')
    p.add_argument('--seed', type=int, default=0)
    return p.parse_args(argv)


def sbg_eval_grasp(grasp_group, models, dexnet_models, poses, config, table):
    """SBG's eval_grasp: graspnetAPI's, 5 grasps per object, empty lists when none is left."""
    from graspnetAPI.utils.eval_utils import (GraspQualityConfigFactory, collision_detection,
                                              compute_closest_points, get_grasp_score,
                                              transform_points)
    grasp_group = grasp_group.nms(0.03, 30.0 / 180 * np.pi)
    posed = [transform_points(m, p) for m, p in zip(models, poses)]
    owner = np.concatenate([np.full(len(m), i, dtype=np.int32) for i, m in enumerate(posed)])
    scene = np.concatenate(posed, axis=0)
    assigned = owner[compute_closest_points(grasp_group.translations, scene)]
    per_object = []
    for i in range(len(models)):
        g = grasp_group[assigned == i]
        g.sort_by_score()
        per_object.append(g[:PER_OBJECT].grasp_group_array)
    stacked = np.vstack(per_object)
    order = np.argsort(stacked[:, 0])[::-1]
    if len(order) == 0:
        return [[] for _ in models], [[] for _ in models], [[] for _ in models]
    min_score = stacked[order[min(CUT_RANK - 1, len(order) - 1)], 0]
    grasp_list = [g[g[:, 0] >= min_score] for g in per_object]
    if table is not None:
        scene = np.concatenate([scene, table])
    collision_list, _, dexgrasp_list = collision_detection(
        grasp_list, posed, dexnet_models, poses, scene, outlier=0.05, return_dexgrasps=True)
    fc_list = np.array([1.2, 1.0, 0.8, 0.6, 0.4, 0.2])
    fc_configs = {}
    for mu in fc_list:
        mu = round(mu, 2)
        config['metrics']['force_closure']['friction_coef'] = mu
        fc_configs[mu] = GraspQualityConfigFactory.create_config(
            config['metrics']['force_closure'])
    score_list = []
    for i in range(len(models)):
        scores = []
        for collided, dexgrasp in zip(collision_list[i], dexgrasp_list[i]):
            if collided or dexgrasp is None:
                scores.append(-1.0)
            else:
                scores.append(get_grasp_score(dexgrasp, dexnet_models[i], fc_list, fc_configs))
        score_list.append(np.array(scores))
    return grasp_list, score_list, collision_list


def frame_accuracy(scores):
    """eval_scene's precision@k loop for TOP_K rows."""
    acc = np.zeros((TOP_K, len(FRICTION)))
    for f, mu in enumerate(FRICTION):
        for k in range(TOP_K):
            top = scores[:k + 1]
            acc[k, f] = np.sum(((top <= mu) & (top > 0)).astype(int)) / (k + 1)
    return acc


def eval_scene_frames(ge, scene_id, dump_dir, frames, seed, size, details):
    from graspnetAPI.grasp import GraspGroup
    from graspnetAPI.utils.config import get_config
    from graspnetAPI.utils.eval_utils import (create_table_points, transform_points,
                                              voxel_sample_points)
    config = get_config()
    table = create_table_points(1.0, 1.0, 0.05, dx=-0.5, dy=-0.5, dz=-0.05, grid_size=0.008)
    np.random.seed(seed)
    model_list, dexmodel_list, _ = ge.get_scene_models(scene_id, ann_id=0)
    sampled = [voxel_sample_points(m, 0.008) for m in model_list]
    lo, hi = SIZES[size]
    out = []
    for ann_id in range(frames):
        path = os.path.join(dump_dir, 'scene_%04d' % scene_id, ge.camera, '%04d.npy' % ann_id)
        grasp_group = GraspGroup().from_npy(path)
        _, pose_list, camera_pose, align_mat = ge.get_model_poses(scene_id, ann_id)
        table_trans = transform_points(table, np.linalg.inv(np.matmul(align_mat, camera_pose)))
        rows = grasp_group.grasp_group_array
        rows[rows[:, 1] < 0, 1] = 0
        rows[rows[:, 1] > MAX_WIDTH, 1] = MAX_WIDTH
        grasp_group.grasp_group_array = rows[(rows[:, 1] >= lo) & (rows[:, 1] < hi)]
        grasp_list, score_list, collision_list = sbg_eval_grasp(
            grasp_group, sampled, dexmodel_list, pose_list, config, table_trans)
        grasp_list = [x for x in grasp_list if len(x)]
        score_list = [x for x in score_list if len(x)]
        collision_list = [x for x in collision_list if len(x)]
        if not grasp_list:
            grasps, scores, collision = np.zeros((0, 17)), np.zeros(0), np.zeros(0, bool)
            acc = np.zeros((TOP_K, len(FRICTION)))
        else:
            grasps, scores = np.concatenate(grasp_list), np.concatenate(score_list)
            collision = np.concatenate(collision_list)
            order = np.argsort(-grasps[:, 0])
            grasps, scores, collision = grasps[order], scores[order], collision[order]
            acc = frame_accuracy(scores)
        key = '%04d_%04d' % (scene_id, ann_id)
        details['grasps_' + key] = grasps
        details['scores_' + key] = scores
        details['collision_' + key] = collision.astype(bool)
        out.append(acc)
    return np.stack(out)


def summary(acc):
    return {'AP': 100.0 * float(np.mean(acc)), 'AP0.8': 100.0 * float(np.mean(acc[..., 3])),
            'AP0.4': 100.0 * float(np.mean(acc[..., 1]))}


def main(argv=None):
    args = parse_args(argv)
    import graspnetAPI
    import open3d
    from graspnetAPI import GraspNetEval
    dumps = dict(d.split('=', 1) for d in args.dump)
    os.makedirs(args.out, exist_ok=True)
    counter = _OutOfBoundsCounter()
    ge = GraspNetEval(args.root, args.camera, split='custom')
    ge.sceneIds = list(args.scenes)
    golden = {'protocol': "SBG evaluate_scale.py's protocol (@5904d5f: 5 per object, TOP_K 20, "
                          'cut at rank 50) re-typed over graspnetAPI in make_scale_golden.py; '
                          "SBG's script itself was not run",
              'camera': args.camera, 'scene_ids': list(args.scenes), 'frames': args.frames,
              'seed': args.seed, 'top_k': TOP_K, 'per_object': PER_OBJECT,
              'sizes': {k: [float(a), float(b)] for k, (a, b) in SIZES.items()},
              'graspnetAPI': _graspnetapi_version(os.path.dirname(os.path.dirname(
                  graspnetAPI.__file__))),
              'numpy': np.__version__, 'open3d': open3d.__version__,
              'python': platform.python_version(), 'dumps': {}}
    for name, dump_dir in dumps.items():
        golden['dumps'][name] = {}
        for size in SIZES:
            details = {}
            counter.count = 0
            acc = np.stack([eval_scene_frames(ge, s, dump_dir, args.frames, args.seed, size,
                                              details) for s in args.scenes])
            np.savez_compressed(os.path.join(args.out, f'{name}_{size}.npz'), accuracy=acc,
                                scene_ids=np.array(args.scenes), **details)
            entry = summary(acc)
            entry['splits'] = {split: summary(acc[[i for i, s in enumerate(args.scenes)
                                                   if s in ids]])
                               for split, ids in SPLITS.items()
                               if any(s in ids for s in args.scenes)}
            entry['kept_grasps'] = int(sum(len(v) for k, v in details.items()
                                           if k.startswith('scores_')))
            entry['sdf_out_of_bounds_queries'] = counter.count
            golden['dumps'][name][size] = entry
            print(f'{name} {size}: AP {entry["AP"]:.3f} AP0.8 {entry["AP0.8"]:.3f} AP0.4 '
                  f'{entry["AP0.4"]:.3f}; kept {entry["kept_grasps"]}', file=sys.stderr)
    tmp = os.path.join(args.out, 'golden_scale.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(golden, f, indent=1)
    os.replace(tmp, os.path.join(args.out, 'golden_scale.json'))


if __name__ == '__main__':
    main()
