#!/usr/bin/env python
"""Small grasp dumps on synthetic test scenes, the inputs of the graspnetAPI golden outputs.

Runs in mmgrasp's environment (numpy only). Writes five dump folders under OUT, each
``<name>/scene_%04d/<camera>/%04d.npy`` of (N, 17) float32 GraspGroup rows (score, width, height,
depth, rotation 9 row-major, translation 3, object id):

* ``gt``: grasps from the dataset's labels as graspnetAPI's ``loadGrasp(format='6d')`` builds them
  (points with 0 < mu <= 0.4 that are free of scene collision, score 1.1 - mu less a draw in
  [0, 0.01) that breaks ties (see TIE_BREAK), rotation
  ``pose_R @ R(-view, angle)``, translation ``pose @ point``), a seeded subset per object;
* ``gt_tied``: the same grasps with loadGrasp's exact scores 1.1 - mu (many equal);
* ``random``: random rotations at model points jittered by 5 mm, random widths, depths, scores;
* ``shifted``: the gt grasps moved 5 cm in a random direction, off their objects;
* ``edge``: frame 0 empty (graspnetAPI's eval_grasp crashes on it: the golden driver scores it
  zeros), later frames one gt grasp of each of three objects, the second with a negative width
  and the third wider than 0.1 m (width clipping).

Poses come from ``annotations/%04d.xml`` (model -> camera, quaternion w x y z). Rotations are
orthonormal in float64 and checked after the float32 cast: dexnet raises "Illegal grasp axis" for
a binormal whose norm is more than 1e-5 from 1.

    python tools/analysis/golden/make_golden_dumps.py DATA_ROOT OUT --camera realsense \
        --scenes 100 130 160 --frames 2
"""
import argparse
import functools
import hashlib
import json
import os
import sys
import xml.etree.ElementTree as ET
import zlib

import numpy as np

GRASP_HEIGHT = 0.02
FRIC_COEF_THRESH = 0.4  # loadGrasp's default
#: gt scores are 1.1 - mu minus a draw below this, so no two are equal (mu order kept):
#: graspnetAPI's result for equal scores depends on the dump's row order (grasp_nms's sort)
TIE_BREAK = 0.01


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('root', help='dataset root written by tools/data/make_synthetic.py')
    p.add_argument('out', help='folder that receives gt/, gt_tied/, random/, shifted/, edge/')
    p.add_argument('--camera', default='realsense')
    p.add_argument('--scenes', type=int, nargs='+', required=True)
    p.add_argument('--frames', type=int, required=True)
    p.add_argument('--per-object', type=int, default=10, help='gt grasps per object and frame')
    p.add_argument('--random', type=int, default=40, help='random grasps per frame')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--make-synthetic-args', default=None, metavar='JSON',
                   help='the make_synthetic.py arguments that wrote ROOT (a JSON list), recorded '
                        'in OUT/dataset.json for the golden test to rebuild ROOT')
    return p.parse_args(argv)


def evaluation_inputs_digest(root: str, camera: str, scenes) -> str:
    """SHA-1 of every file the evaluator reads for ``scenes``: annotations, camera poses, the
    table alignment and the models (PLY, OBJ, SDF) of the objects in frame 0's annotation."""
    h = hashlib.sha1()
    ids = set()
    for scene in sorted(scenes):
        cdir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
        names = sorted(os.listdir(os.path.join(cdir, 'annotations')))
        files = [os.path.join('annotations', n) for n in names]
        files += ['camera_poses.npy', 'cam0_wrt_table.npy']
        for rel in files:
            with open(os.path.join(cdir, rel), 'rb') as f:
                h.update(f'{scene}/{rel}'.encode() + hashlib.sha1(f.read()).digest())
        ids.update(i for i, _ in read_annotation(os.path.join(cdir, 'annotations', names[0])))
    for i in sorted(ids):
        for name in ('nontextured.ply', 'textured.obj', 'textured.sdf'):
            with open(os.path.join(root, 'models', f'{i:03d}', name), 'rb') as f:
                h.update(f'{i}/{name}'.encode() + hashlib.sha1(f.read()).digest())
    return h.hexdigest()


def _rng(seed: int, purpose: str, *index: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(purpose.encode()), *index])


def quat_to_matrix(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def read_annotation(path: str):
    """[(object id, 4x4 model -> camera)] in file order; children read by position, as the API."""
    objects = []
    for obj in ET.parse(path).getroot().findall('obj'):
        child = list(obj)
        pose = np.eye(4)
        pose[:3, :3] = quat_to_matrix([float(v) for v in child[4].text.split()])
        pose[:3, 3] = [float(v) for v in child[3].text.split()]
        objects.append((int(child[0].text), pose))
    return objects


def views(n: int) -> np.ndarray:
    """graspnetAPI generate_views: Fibonacci lattice, z = (2i+1)/n - 1, azimuth 2 pi i phi."""
    i = np.arange(n, dtype=np.float64)
    z = (2 * i + 1) / n - 1
    r, az = np.sqrt(1 - z ** 2), 2 * np.pi * i * (np.sqrt(5) - 1) / 2
    return np.stack([r * np.cos(az), r * np.sin(az), z], 1)


def viewpoint_to_matrix(towards: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """batch_viewpoint_params_to_matrix: x = towards, y = (-x_y, x_x, 0), z = x cross y, then Rx."""
    x = towards / np.linalg.norm(towards, axis=-1, keepdims=True)
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(len(x))], -1)
    y[np.linalg.norm(y, axis=-1) == 0] = (0, 1, 0)
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    z = np.cross(x, y)
    c, s = np.cos(angle), np.sin(angle)
    rx = np.zeros((len(x), 3, 3))
    rx[:, 0, 0], rx[:, 1, 1], rx[:, 1, 2], rx[:, 2, 1], rx[:, 2, 2] = 1, c, -s, s, c
    return np.stack([x, y, z], -1) @ rx


def random_rotations(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return np.stack([quat_to_matrix(v) for v in q])


def rows(score, width, depth, rot, trans, obj_id) -> np.ndarray:
    n = len(score)
    out = np.zeros((n, 17), np.float64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = score, width, GRASP_HEIGHT, depth
    out[:, 4:13], out[:, 13:16], out[:, 16] = rot.reshape(n, 9), trans, obj_id
    out = out.astype(np.float32)
    r = out[:, 4:13].reshape(n, 3, 3).astype(np.float64)
    err = np.abs(r.transpose(0, 2, 1) @ r - np.eye(3)).max() if n else 0.0
    if err > 1e-6:
        raise ValueError(f'rotation not orthonormal after the float32 cast: {err:.2e}')
    return out


def gt_grasps(root, scene, objects, rng, per_object, tie_break=TIE_BREAK):
    """loadGrasp(format='6d', fric_coef_thresh=0.4) for one frame, ``per_object`` drawn per box."""
    collision = np.load(os.path.join(root, 'collision_label', f'scene_{scene:04d}',
                                     'collision_labels.npz'))
    out = []
    for i, (obj_id, pose) in enumerate(objects):
        lab = np.load(os.path.join(root, 'grasp_label', f'{obj_id:03d}_labels.npz'))
        points, offsets, mu = lab['points'], lab['offsets'], lab['scores']
        _, v, a, d = mu.shape
        ok = (mu <= FRIC_COEF_THRESH) & (mu > 0) & ~collision[f'arr_{i}']
        cells = np.argwhere(ok)
        if len(cells) == 0:
            continue
        cells = cells[np.sort(rng.choice(len(cells), min(per_object, len(cells)),
                                         replace=False))]
        p, vi, ai, di = cells.T
        off = offsets[p, vi, ai, di].astype(np.float64)
        rot = pose[:3, :3] @ viewpoint_to_matrix(-views(v)[vi], off[:, 0])
        trans = points[p].astype(np.float64) @ pose[:3, :3].T + pose[:3, 3]
        score = 1.1 - mu[p, vi, ai, di].astype(np.float64) - rng.uniform(0, tie_break, len(p))
        out.append(rows(score, off[:, 2], off[:, 1], rot, trans, obj_id))
    return np.concatenate(out) if out else np.zeros((0, 17), np.float32)


def random_grasps(root, objects, rng, n):
    ids = rng.integers(0, len(objects), n)
    trans = np.zeros((n, 3))
    for k, i in enumerate(ids):
        obj_id, pose = objects[i]
        pts = _model_vertices(root, obj_id)
        trans[k] = pts[rng.integers(len(pts))] @ pose[:3, :3].T + pose[:3, 3]
    trans += rng.normal(scale=0.005, size=(n, 3))
    return rows(rng.random(n), rng.uniform(0.01, 0.1, n), rng.choice([0.01, 0.02, 0.03, 0.04], n),
                random_rotations(rng, n), trans, np.array([objects[i][0] for i in ids]))


@functools.lru_cache(maxsize=None)
def _model_vertices(root, obj_id):
    """Vertices of a model's ``nontextured.ply`` (ASCII or binary), as graspnetAPI reads them."""
    from mmgrasp.evaluation.scene_models import read_ply_points
    return read_ply_points(os.path.join(root, 'models', f'{obj_id:03d}', 'nontextured.ply'))


def shifted(grasps, rng):
    direction = rng.normal(size=(len(grasps), 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    out = grasps.copy()
    out[:, 13:16] += (0.05 * direction).astype(np.float32)
    return out


def main(argv=None) -> None:
    a = parse_args(argv)
    for scene in a.scenes:
        for frame in range(a.frames):
            cdir = os.path.join(a.root, 'scenes', f'scene_{scene:04d}', a.camera)
            objects = read_annotation(os.path.join(cdir, 'annotations', f'{frame:04d}.xml'))
            gt = gt_grasps(a.root, scene, objects, _rng(a.seed, 'gt', scene, frame), a.per_object)
            dumps = {
                'gt': gt,
                # loadGrasp's exact scores: equal ones are ordered by grasp_nms's and numpy's sorts
                'gt_tied': gt_grasps(a.root, scene, objects, _rng(a.seed, 'gt', scene, frame),
                                     a.per_object, tie_break=0.0),
                'random': random_grasps(a.root, objects, _rng(a.seed, 'random', scene, frame),
                                        a.random),
                'shifted': shifted(gt, _rng(a.seed, 'shift', scene, frame)),
            }
            if frame == 0:
                dumps['edge'] = np.zeros((0, 17), np.float32)
            else:
                # one gt grasp of each of three objects (NMS keeps all three), two widths clipped
                first = np.unique(gt[:, 16], return_index=True)[1][:3]
                edge = gt[np.sort(first)].copy()
                edge[1:, 1] = np.float32([-0.01, 0.14])[:len(edge) - 1]
                dumps['edge'] = edge
            for name, arr in dumps.items():
                d = os.path.join(a.out, name, f'scene_{scene:04d}', a.camera)
                os.makedirs(d, exist_ok=True)
                np.save(os.path.join(d, f'{frame:04d}.npy'), arr)
            print(f'scene {scene} frame {frame}: ' +
                  ', '.join(f'{k} {len(v)}' for k, v in dumps.items()))
    info = {'evaluation_inputs_sha1': evaluation_inputs_digest(a.root, a.camera, a.scenes),
            'make_synthetic_args': a.make_synthetic_args,
            'dumps_command_args': json.dumps(argv if argv is not None else sys.argv[1:])}
    with open(os.path.join(a.out, 'dataset.json'), 'w') as f:
        json.dump(info, f, indent=1)


if __name__ == '__main__':
    main()
