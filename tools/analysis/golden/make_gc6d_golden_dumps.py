#!/usr/bin/env python
"""Dumps for the GraspClutter6D golden (tests/data/gc6d_golden/), in mmgrasp's environment.

For each test scene, camera and annotation 0..F-1 of a synthetic GraspClutter6D root
(``make_synthetic.py --layout graspclutter6d``), writes ``OUT/<dump>/%06d/<camera>/%06d.npy``
(scene id, camera name, image id = 4·annotation + camera index), (N, 17) float32 rows:

* ``gt``: loadGrasp's grasps (0 < μ <= 0.4, no collision) of every instance, ``--per-object``
  cells drawn per instance, scores 1.1 - μ minus a small draw (no ties);
* ``random``: random rotations at model surface points of random instances, widths in
  [-0.01, 0.2] (both ends clipped to [0, 0.14]) and a fifth of the grasps moved 6-20 cm off the
  objects (the background filter's work);
* ``shifted``: ``gt`` moved 5 cm in random directions.

Poses come from ``scene_gt.json`` (mm -> m, float64) read here, not through mmgrasp's reader.
``OUT/dataset.json`` records the dataset's command and a SHA-1 of every file the evaluation
reads, so the test can tell a changed writer from a changed evaluator.

    python tools/analysis/golden/make_gc6d_golden_dumps.py ROOT OUT --cameras realsense-d435 \
        zivid --frames 2 --make-synthetic-args '[...]'
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden_dumps import (FRIC_COEF_THRESH, TIE_BREAK, _rng, random_rotations,  # noqa: E402
                               rows, viewpoint_to_matrix, views)

CAMERA_INDEX = {'realsense-d415': 1, 'realsense-d435': 2, 'azure-kinect': 3, 'zivid': 4}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root')
    p.add_argument('out')
    p.add_argument('--cameras', nargs='+', default=['realsense-d435', 'zivid'])
    p.add_argument('--frames', type=int, default=2, help='annotations 0..F-1 get dumps')
    p.add_argument('--per-object', type=int, default=12)
    p.add_argument('--random', type=int, default=60)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--make-synthetic-args', default='[]')
    return p.parse_args(argv)


def test_scenes(root):
    with open(os.path.join(root, 'split_info', 'grasp_test_scene_ids.json')) as f:
        return [int(s) for s in json.load(f)]


def instances(root, scene, image):
    with open(os.path.join(root, 'scenes', f'{scene:06d}', 'scene_gt.json')) as f:
        out = []
        for inst in json.load(f)[str(image)]:
            pose = np.eye(4)
            pose[:3, :3] = np.reshape(inst['cam_R_m2c'], (3, 3))
            pose[:3, 3] = np.reshape(inst['cam_t_m2c'], 3) / 1000.0
            out.append((int(inst['obj_id']), pose))
    return out


def ply_vertices(root, obj_id):
    with open(os.path.join(root, 'models_m', f'obj_{obj_id:06d}.ply')) as f:
        lines = f.read().splitlines()
    start = lines.index('end_header') + 1
    count = next(int(line.split()[2]) for line in lines if line.startswith('element vertex'))
    return np.array([[float(x) for x in line.split()[:3]] for line in lines[start:start + count]])


def gt_grasps(root, scene, objects, rng, per_object):
    collision = np.load(os.path.join(root, 'collision_label', f'{scene:06d}.npz'))
    out = []
    for i, (obj_id, pose) in enumerate(objects):
        lab = np.load(os.path.join(root, 'grasp_label', f'obj_{obj_id:06d}_labels.npz'))
        points, offsets, mu = lab['points'], lab['offsets'], lab['scores']
        ok = (mu <= FRIC_COEF_THRESH) & (mu > 0) & ~collision[f'arr_{i}']
        cells = np.argwhere(ok)
        if len(cells) == 0:
            continue
        cells = cells[np.sort(rng.choice(len(cells), min(per_object, len(cells)), replace=False))]
        p, vi, ai, di = cells.T
        off = offsets[p, vi, ai, di].astype(np.float64)
        rot = pose[:3, :3] @ viewpoint_to_matrix(-views(mu.shape[1])[vi], off[:, 0])
        trans = points[p].astype(np.float64) @ pose[:3, :3].T + pose[:3, 3]
        score = 1.1 - mu[p, vi, ai, di].astype(np.float64) - rng.uniform(0, TIE_BREAK, len(p))
        out.append(rows(score, off[:, 2], off[:, 1], rot, trans, obj_id))
    return np.concatenate(out) if out else np.zeros((0, 17), np.float32)


def random_grasps(root, objects, rng, n):
    picks = rng.integers(0, len(objects), n)
    trans = np.zeros((n, 3))
    for k, i in enumerate(picks):
        obj_id, pose = objects[i]
        pts = ply_vertices(root, obj_id)
        trans[k] = pts[rng.integers(len(pts))] @ pose[:3, :3].T + pose[:3, 3]
    trans += rng.normal(scale=0.005, size=(n, 3))
    far = rng.random(n) < 0.2
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    trans[far] += direction[far] * rng.uniform(0.06, 0.2, (far.sum(), 1))
    return rows(rng.random(n), rng.uniform(-0.01, 0.2, n), rng.choice([0.01, 0.02, 0.03, 0.04], n),
                random_rotations(rng, n), trans, np.array([objects[i][0] for i in picks]))


def shifted(grasps, rng):
    direction = rng.normal(size=(len(grasps), 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    out = grasps.copy()
    out[:, 13:16] += (0.05 * direction).astype(np.float32)
    return out


def evaluation_inputs_digest(root, scenes) -> str:
    """SHA-1 of what the evaluation reads: split file, scene JSONs, models and SDFs."""
    h = hashlib.sha1()
    paths = [os.path.join(root, 'split_info', 'grasp_test_scene_ids.json')]
    objs = set()
    for s in scenes:
        for name in ('scene_gt.json', 'scene_camera.json'):
            paths.append(os.path.join(root, 'scenes', f'{s:06d}', name))
        with open(os.path.join(root, 'scenes', f'{s:06d}', 'scene_gt.json')) as f:
            objs |= {i['obj_id'] for v in json.load(f).values() for i in v}
    for o in sorted(objs):
        paths += [os.path.join(root, 'models_m', f'obj_{o:06d}.ply'),
                  os.path.join(root, 'models_obj_m', f'obj_{o:06d}.sdf')]
    for p in paths:
        with open(p, 'rb') as f:
            h.update(os.path.relpath(p, root).encode() + b'\0' + f.read())
    return h.hexdigest()


def main(argv=None) -> None:
    a = parse_args(argv)
    scenes = test_scenes(a.root)
    for scene in scenes:
        for camera in a.cameras:
            for ann in range(a.frames):
                image = 4 * ann + CAMERA_INDEX[camera]
                objects = instances(a.root, scene, image)
                gt = gt_grasps(a.root, scene, objects, _rng(a.seed, 'gc6d-gt', scene, image),
                               a.per_object)
                dumps = {'gt': gt,
                         'random': random_grasps(a.root, objects,
                                                 _rng(a.seed, 'gc6d-random', scene, image),
                                                 a.random),
                         'shifted': shifted(gt, _rng(a.seed, 'gc6d-shift', scene, image))}
                for name, arr in dumps.items():
                    d = os.path.join(a.out, name, f'{scene:06d}', camera)
                    os.makedirs(d, exist_ok=True)
                    np.save(os.path.join(d, f'{image:06d}.npy'), arr)
                print(f'scene {scene} {camera} image {image}: ' +
                      ', '.join(f'{k} {len(v)}' for k, v in dumps.items()))
    info = {'evaluation_inputs_sha1': evaluation_inputs_digest(a.root, scenes),
            'make_synthetic_args': json.loads(a.make_synthetic_args),
            'dumps_command_args': argv if argv is not None else sys.argv[1:]}
    with open(os.path.join(a.out, 'dataset.json'), 'w') as f:
        json.dump(info, f, indent=1)


if __name__ == '__main__':
    main()
