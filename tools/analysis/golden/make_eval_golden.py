#!/usr/bin/env python
"""Golden evaluation outputs from graspnetAPI itself, for mmgrasp's GraspNetMetric to reproduce.

Runs ONLY in graspnetAPI's own environment (see setup_graspnetapi_env.sh; numpy 1.23.4), never in
mmgrasp's. For every dump folder it evaluates the given scenes and frames exactly as
``GraspNetEval.eval_scene`` does - the same graspnetAPI calls in the same order (scene models and
dexnet models from frame 0's annotation, 8 mm voxel sampling, the table box, width clipping to
[0, 0.1], ``eval_grasp``, the per-frame precision@k loop) - with two departures, because
``eval_scene`` hard-codes them:

* frames ``0..F-1`` of the given scenes instead of ``range(256)`` of the split's scene ids;
* an empty dump (0 grasps) makes ``eval_grasp`` raise IndexError (``remain_mask[min(49, -1)]``);
  such a frame is not passed to it and scores zeros - what eval_scene itself gives a frame whose
  grasps all vanish. The JSON lists these frames under ``empty_frames``.

``np.random.seed(seed)`` is called before each scene's dexnet models are built: ``Sdf3D`` draws
1000 random surface cells with it, used for signed distances queried outside the SDF grid. The
JSON counts ``Sdf3D.is_out_of_bounds`` hits (``sdf_out_of_bounds_queries``: such queries, plus
interpolation corners past the grid's last cell); when it is 0 the draw cannot affect a result.

Writes into OUT: ``<dump>.npz`` per dump (``accuracy`` (S, F, 50, 6) float64, ``scene_ids``, and
per frame ``grasps_SSSS_FFFF`` (K, 17) / ``scores_SSSS_FFFF`` (K,) / ``collision_SSSS_FFFF`` (K,):
the grasps graspnetAPI kept, sorted by predicted score, their friction score or -1, and the
collision-or-empty mask), ``golden.json`` (AP, AP0.8, AP0.4 per dump and per split, the settings,
versions), ``models.npz`` (``points_%03d``: each model's points as graspnetAPI read and
sampled them: open3d's PLY reader, ``voxel_sample_points(.., 0.008)``) and
``timing_graspnetapi.json`` (frames/s, wall and CPU time, one process).

    python tools/analysis/golden/make_eval_golden.py DATA_ROOT OUT --camera realsense \
        --scenes 100 130 160 --frames 2 --dump gt=DUMPS/gt --dump random=DUMPS/random
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

FRICTION = [0.2, 0.4, 0.6, 0.8, 1.0, 1.2]
TOP_K = 50
MAX_WIDTH = 0.1
SPLITS = {'seen': range(100, 130), 'similar': range(130, 160), 'novel': range(160, 190)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='dataset root (GraspNet-1Billion layout)')
    p.add_argument('out', help='folder for <dump>.npz, golden.json, timing_graspnetapi.json')
    p.add_argument('--camera', default='realsense')
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True, help='frames 0..F-1 of every scene')
    p.add_argument('--dump', action='append', required=True, metavar='NAME=DIR',
                   help='a dump folder (DIR/scene_%%04d/<camera>/%%04d.npy); repeatable')
    p.add_argument('--seed', type=int, default=0,
                   help="np.random.seed before each scene's dexnet models")
    p.add_argument('--dataset-info', default=None, metavar='JSON',
                   help="make_golden_dumps.py's dataset.json (the dataset's command and "
                        'fingerprint), recorded in golden.json under "meta"')
    return p.parse_args(argv)


class _OutOfBoundsCounter:
    """Counts ``Sdf3D.is_out_of_bounds`` hits: out-of-grid queries use the random surface sample."""

    def __init__(self):
        from graspnetAPI.utils.dexnet.grasping.meshpy.sdf import Sdf3D
        self.count = 0
        original = Sdf3D.is_out_of_bounds

        def counting(sdf, coords):
            out = original(sdf, coords)
            self.count += bool(out)
            return out
        Sdf3D.is_out_of_bounds = counting


def frame_accuracy(scores: np.ndarray) -> np.ndarray:
    """eval_scene's precision@k loop: (50, 6) for friction scores sorted by confidence."""
    acc = np.zeros((TOP_K, len(FRICTION)))
    for f, fric in enumerate(FRICTION):
        for k in range(TOP_K):
            top = scores if k + 1 > len(scores) else scores[:k + 1]
            acc[k, f] = np.sum(((top <= fric) & (top > 0)).astype(int)) / (k + 1)
    return acc


def eval_scene_frames(ge, scene_id, dump_dir, frames, seed, details, empty_frames, models):
    """eval_scene's body for frames 0..frames-1 (see the module docstring for the departures)."""
    from graspnetAPI.grasp import GraspGroup
    from graspnetAPI.utils.config import get_config
    from graspnetAPI.utils.eval_utils import (create_table_points, eval_grasp, transform_points,
                                              voxel_sample_points)
    config = get_config()
    table = create_table_points(1.0, 1.0, 0.05, dx=-0.5, dy=-0.5, dz=-0.05, grid_size=0.008)
    np.random.seed(seed)  # GraspNetMetric(sdf_sample_seed=seed) draws the same sample per scene
    model_list, dexmodel_list, obj_list = ge.get_scene_models(scene_id, ann_id=0)
    model_sampled_list = [voxel_sample_points(m, 0.008) for m in model_list]
    models.update({'points_%03d' % i: m for i, m in zip(obj_list, model_sampled_list)})
    scene_acc = []
    for ann_id in range(frames):
        path = os.path.join(dump_dir, 'scene_%04d' % scene_id, ge.camera, '%04d.npy' % ann_id)
        grasp_group = GraspGroup().from_npy(path)
        _, pose_list, camera_pose, align_mat = ge.get_model_poses(scene_id, ann_id)
        table_trans = transform_points(table, np.linalg.inv(np.matmul(align_mat, camera_pose)))
        gg_array = grasp_group.grasp_group_array
        gg_array[gg_array[:, 1] < 0, 1] = 0
        gg_array[gg_array[:, 1] > MAX_WIDTH, 1] = MAX_WIDTH
        grasp_group.grasp_group_array = gg_array
        key = '%04d_%04d' % (scene_id, ann_id)
        if len(grasp_group) == 0:
            empty_frames.append([scene_id, ann_id])
            grasp_list, score_list, collision_list = [], [], []
        else:
            grasp_list, score_list, collision_list = eval_grasp(
                grasp_group, model_sampled_list, dexmodel_list, pose_list, config,
                table=table_trans, voxel_size=0.008, TOP_K=TOP_K)
        grasp_list = [x for x in grasp_list if len(x) != 0]
        score_list = [x for x in score_list if len(x) != 0]
        collision_list = [x for x in collision_list if len(x) != 0]
        if len(grasp_list) == 0:
            grasps, scores, collision = np.zeros((0, 17)), np.zeros(0), np.zeros(0, bool)
            acc = np.zeros((TOP_K, len(FRICTION)))
        else:
            grasps, scores = np.concatenate(grasp_list), np.concatenate(score_list)
            collision = np.concatenate(collision_list)
            order = np.argsort(-grasps[:, 0])
            grasps, scores, collision = grasps[order], scores[order], collision[order]
            acc = frame_accuracy(scores)
        details['grasps_' + key] = grasps
        details['scores_' + key] = scores
        details['collision_' + key] = collision.astype(bool)
        scene_acc.append(acc)
    return np.stack(scene_acc)


def summary(acc: np.ndarray) -> dict:
    """AP, AP0.8, AP0.4 in percent of an (..., 50, 6) accuracy array (graspnetAPI: np.mean)."""
    return {'AP': 100.0 * float(np.mean(acc)), 'AP0.8': 100.0 * float(np.mean(acc[..., 3])),
            'AP0.4': 100.0 * float(np.mean(acc[..., 1]))}


def graspnetapi_identity(module) -> dict:
    """What the imported graspnetAPI says it is: its distribution version, where it was imported
    from and, when that folder is a git checkout, its commit (None otherwise) - never a string
    written here by hand."""
    from importlib.metadata import version
    src = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
    try:
        commit = subprocess.run(['git', '-C', src, 'rev-parse', 'HEAD'], capture_output=True,
                                text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {'version': version('graspnetAPI'), 'commit': commit,
            'imported_from': os.path.abspath(module.__file__)}


def main(argv=None):
    args = parse_args(argv)
    from importlib.metadata import version

    import graspnetAPI
    import open3d
    from graspnetAPI import GraspNetEval
    dumps = dict(d.split('=', 1) for d in args.dump)
    os.makedirs(args.out, exist_ok=True)
    counter = _OutOfBoundsCounter()
    ge = GraspNetEval(args.root, args.camera, split='custom')
    ge.sceneIds = list(args.scenes)  # only the camera and root matter for the calls below
    golden = {'camera': args.camera, 'scene_ids': list(args.scenes), 'frames': args.frames,
              'seed': args.seed, 'top_k': TOP_K, 'friction': FRICTION, 'max_width': MAX_WIDTH,
              'graspnetAPI': graspnetapi_identity(graspnetAPI),
              'grasp_nms': version('grasp_nms'),
              'numpy': np.__version__, 'open3d': open3d.__version__,
              'python': platform.python_version(),
              'meta': {}, 'dumps': {}}
    if args.dataset_info:
        with open(args.dataset_info) as f:
            golden['meta'] = json.load(f)
    timing = {'camera': args.camera, 'scene_ids': list(args.scenes), 'frames_per_scene':
              args.frames, 'processes': 1, 'threads': os.environ.get('OMP_NUM_THREADS', 'unset'),
              'dumps': {}}
    models = {}
    for name, dump_dir in dumps.items():
        details, empty_frames = {}, []
        counter.count = 0
        wall, cpu = time.perf_counter(), time.process_time()
        acc = np.stack([eval_scene_frames(ge, s, dump_dir, args.frames, args.seed, details,
                                          empty_frames, models) for s in args.scenes])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        np.savez_compressed(os.path.join(args.out, name + '.npz'), accuracy=acc,
                            scene_ids=np.array(args.scenes), **details)
        entry = summary(acc)
        entry['splits'] = {}
        for split, ids in SPLITS.items():
            rows = [i for i, s in enumerate(args.scenes) if s in ids]
            if rows:
                entry['splits'][split] = summary(acc[rows])
        entry['empty_frames'] = empty_frames
        entry['kept_grasps'] = int(sum(len(v) for k, v in details.items()
                                       if k.startswith('scores_')))
        entry['sdf_out_of_bounds_queries'] = counter.count
        golden['dumps'][name] = entry
        frames = len(args.scenes) * args.frames
        timing['dumps'][name] = {'frames': frames, 'wall_s': wall, 'cpu_s': cpu,
                                 'frames_per_s_wall': frames / wall,
                                 'frames_per_s_cpu': frames / cpu,
                                 'kept_grasps': entry['kept_grasps']}
        print(f'{name}: AP {entry["AP"]:.3f} AP0.8 {entry["AP0.8"]:.3f} AP0.4 '
              f'{entry["AP0.4"]:.3f}; {frames} frames in {wall:.1f} s wall, {cpu:.1f} s CPU; '
              f'empty frames {empty_frames}; out-of-grid SDF queries {counter.count}',
              file=sys.stderr)
    np.savez_compressed(os.path.join(args.out, 'models.npz'), **models)
    for fname, obj in (('golden.json', golden), ('timing_graspnetapi.json', timing)):
        tmp = os.path.join(args.out, fname + '.tmp')
        with open(tmp, 'w') as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, os.path.join(args.out, fname))


if __name__ == '__main__':
    main()
