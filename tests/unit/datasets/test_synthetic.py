"""Tests of the synthetic GraspNet-layout writer (mmgrasp.datasets.synthetic)."""
import os
import re
import subprocess
import sys

import xml.etree.ElementTree as ET

import cv2
import numpy as np
import pytest
import scipy.io

from mmgrasp.datasets.synthetic import (MU_VALUES, RS_WRT_KN, TOLERANCE_RADII, box_sdf_grid,
                                        box_signed_distance, camera_intrinsics,
                                        model_half_extents, write_synthetic_dataset)
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GRID = (6, 3, 2)  # V*A*D = 36 is not a multiple of 8 (bool packing edge case for readers)
SIZE = (320, 180)
SMALL = dict(scenes=2, frames=2, objects=3, points_per_object=40, grid=GRID, image_size=SIZE,
             duplicates=0, seed=3, progress=False, test_scenes=(100, 130))
SCENES = (0, 1, 100, 130)
CAMERAS = ('realsense', 'kinect')


@pytest.fixture(scope='module')
def small(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('syn') / 'data')
    write_synthetic_dataset(root, **SMALL)
    return root


def _files(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, 'rb') as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def _png(cdir, kind, frame):
    return cv2.imread(os.path.join(cdir, kind, f'{frame:04d}.png'), cv2.IMREAD_UNCHANGED)


def _quat_to_matrix(q):
    """w x y z quaternion -> rotation (the formula transforms3d's quat2mat uses)."""
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _read_annotations(path):
    """(ids, 4x4 poses) the way graspnetAPI's xmlReader reads them: children by position."""
    ids, poses = [], []
    for obj in ET.parse(path).getroot():
        ids.append(int(obj[0].text))
        assert obj[0].tag == 'obj_id' and obj[3].tag == 'pos_in_world' and \
            obj[4].tag == 'ori_in_world' and obj[1].text and obj[2].text
        pose = np.eye(4)
        pose[:3, :3] = _quat_to_matrix([float(v) for v in obj[4].text.split()])
        pose[:3, 3] = [float(v) for v in obj[3].text.split()]
        poses.append(pose)
    return ids, poses


def _check_models(mdir, half):
    """Dense PLY vertices on the surface, the OBJ box, and an SDF with the box as zero set."""
    with open(os.path.join(mdir, 'nontextured.ply')) as f:
        ply = f.read().splitlines()
    n = int(ply[2].split()[-1])
    assert ply[0] == 'ply' and ply[6] == 'end_header' and len(ply) == 7 + n
    verts = np.array([[float(v) for v in line.split()] for line in ply[7:]])
    assert np.abs(box_signed_distance(half, verts)).max() < 1e-6
    area = 8 * (half[0] * half[1] + half[1] * half[2] + half[0] * half[2])
    assert n >= area / 0.0025 ** 2  # a 2.5 mm grid: dozens of points per 8 mm voxel
    for k in range(3):  # every face is covered, edges included
        assert np.isclose(verts[:, k].max(), half[k], atol=1e-6)
    with open(os.path.join(mdir, 'textured.obj')) as f:
        obj = [line.split() for line in f]
    v = np.array([[float(x) for x in r[1:]] for r in obj if r[0] == 'v'])
    faces = np.array([[int(x) - 1 for x in r[1:]] for r in obj if r[0] == 'f'])
    np.testing.assert_allclose(np.abs(v), np.broadcast_to(half, (8, 3)), atol=1e-6)
    tri = v[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert faces.shape == (12, 3) and np.all(np.einsum('ij,ij->i', normal, tri.mean(1)) > 0)
    with open(os.path.join(mdir, 'textured.sdf')) as f:
        dims = [int(x) for x in f.readline().split()]
        origin = np.array([float(x) for x in f.readline().split()])
        res = float(f.readline())
        values = np.loadtxt(f)
    data = values.reshape(dims[::-1]).transpose(2, 1, 0)  # x fastest, as dexnet's reader loops
    expected, exp_origin, exp_res = box_sdf_grid(half)
    assert res == exp_res and np.allclose(origin, exp_origin, atol=1e-6)
    np.testing.assert_allclose(data, expected, atol=1e-8)
    nodes = origin + res * np.stack(np.meshgrid(*[np.arange(n) for n in dims], indexing='ij'), -1)
    exact = box_signed_distance(half, nodes)
    assert np.array_equal(np.sign(data), np.sign(exact))  # same zero set and inside
    assert np.all(origin < -half - 0.01) and np.all(origin + res * (np.array(dims) - 1) > half)


def _scene_ids(root, scene):
    with open(os.path.join(root, 'scenes', f'scene_{scene:04d}', 'object_id_list.txt')) as f:
        return [int(x) for x in f.read().split()]


def test_layout_shapes_dtypes(small):
    models = SMALL['objects'] + 2
    assert sorted(os.listdir(small)) == ['collision_label', 'grasp_label', 'models', 'scenes',
                                         'tolerance']
    assert sorted(os.listdir(os.path.join(small, 'scenes'))) == [
        'scene_0000', 'scene_0001', 'scene_0100', 'scene_0130']
    assert not any('.tmp-' in n for n in os.listdir(os.path.dirname(small)))
    nps = {}
    for m in range(models):
        g = np.load(os.path.join(small, 'grasp_label', f'{m:03d}_labels.npz'))
        assert sorted(g.files) == ['collision', 'offsets', 'points', 'scores']
        n = g['points'].shape[0]
        nps[m] = n
        assert 36 <= n <= 44
        assert g['points'].dtype == np.float32 and g['points'].shape == (n, 3)
        assert g['offsets'].dtype == np.float32 and g['offsets'].shape == (n, *GRID, 3)
        assert g['collision'].dtype == bool and g['collision'].shape == (n, *GRID)
        assert g['scores'].dtype == np.float32 and g['scores'].shape == (n, *GRID)
        tol = np.load(os.path.join(small, 'tolerance', f'{m:03d}_tolerance.npy'))
        assert tol.dtype == np.float32 and tol.shape == (n, *GRID)
        # label points lie on the box surface
        half = model_half_extents(SMALL['seed'], m)
        p = np.abs(g['points'])
        assert np.all(p <= half + 1e-6) and np.all(np.abs(p - half).min(axis=1) < 1e-6)
        _check_models(os.path.join(small, 'models', f'{m:03d}'), half)
    for s in SCENES:
        sdir = os.path.join(small, 'scenes', f'scene_{s:04d}')
        ids = _scene_ids(small, s)
        assert len(ids) == SMALL['objects'] and len(set(ids)) == len(ids)
        rs = np.load(os.path.join(sdir, 'rs_wrt_kn.npy'))
        assert rs.dtype == np.float64 and rs.shape == (4, 4)
        col = np.load(os.path.join(small, 'collision_label', f'scene_{s:04d}',
                                   'collision_labels.npz'))
        assert col.files == [f'arr_{i}' for i in range(len(ids))]
        for i, m in enumerate(ids):
            assert col[f'arr_{i}'].dtype == bool and col[f'arr_{i}'].shape == (nps[m], *GRID)
        cam0 = {}
        for cam in CAMERAS:
            cdir = os.path.join(sdir, cam)
            K = np.load(os.path.join(cdir, 'camK.npy'))
            assert K.dtype == np.float64 and K.shape == (3, 3)
            np.testing.assert_allclose(K, camera_intrinsics(cam, SIZE))
            poses = np.load(os.path.join(cdir, 'camera_poses.npy'))
            assert poses.dtype == np.float64 and poses.shape == (SMALL['frames'], 4, 4)
            np.testing.assert_allclose(poses[0], np.eye(4), atol=1e-12)
            cam0[cam] = np.load(os.path.join(cdir, 'cam0_wrt_table.npy'))
            assert cam0[cam].dtype == np.float64 and 0.45 < cam0[cam][2, 3] < 0.75
            assert cam0[cam][:3, 2] @ [0, 0, 1] < -0.5  # looks down at the table
            for f in range(SMALL['frames']):
                depth = _png(cdir, 'depth', f)
                label = _png(cdir, 'label', f)
                rgb = _png(cdir, 'rgb', f)
                assert depth.dtype == np.uint16 and depth.shape == SIZE[::-1]
                assert label.dtype == np.uint8 and label.shape == SIZE[::-1]
                assert rgb.dtype == np.uint8 and rgb.shape == (*SIZE[::-1], 3)
                assert (depth == 0).any() and (depth > 0).mean() > 0.5
                assert set(np.unique(label)) <= {0, *(m + 1 for m in ids)}
                meta = scipy.io.loadmat(os.path.join(cdir, 'meta', f'{f:04d}.mat'))
                assert meta['poses'].dtype == np.float32 and meta['poses'].shape == (3, 4, len(ids))
                assert meta['cls_indexes'].dtype == np.int64
                np.testing.assert_array_equal(meta['cls_indexes'], [[m + 1 for m in ids]])
                assert meta['intrinsic_matrix'].dtype == np.float64
                np.testing.assert_array_equal(meta['intrinsic_matrix'], K)
                assert meta['factor_depth'].dtype == np.float64
                np.testing.assert_array_equal(meta['factor_depth'], [[1000.0]])
                # annotations: same objects and poses (model -> current camera) as the meta file
                xml_ids, xml_poses = _read_annotations(os.path.join(cdir, 'annotations',
                                                                    f'{f:04d}.xml'))
                assert xml_ids == ids
                for i, pose in enumerate(xml_poses):
                    np.testing.assert_allclose(pose[:3], meta['poses'][..., i], atol=2e-7)
                    camera_to_table = cam0[cam] @ poses[f]
                    assert abs((camera_to_table @ pose)[2, 3] - model_half_extents(
                        SMALL['seed'], ids[i])[2]) < 1e-6  # resting on the table
        np.testing.assert_allclose(cam0['realsense'], cam0['kinect'] @ rs, atol=1e-12)
        np.testing.assert_allclose(rs, RS_WRT_KN)


def test_intrinsics_scaling():
    np.testing.assert_allclose(camera_intrinsics('realsense'),
                               [[927.17, 0, 651.32], [0, 927.37, 349.62], [0, 0, 1]])
    K = camera_intrinsics('kinect', (640, 180))
    np.testing.assert_allclose(K[[0, 1, 0, 1], [0, 1, 2, 2]],
                               [631.55 / 2, 631.21 / 4, 638.43 / 2, 366.50 / 4])


def test_deterministic(small, tmp_path):
    again = str(tmp_path / 'again')
    write_synthetic_dataset(again, **SMALL)
    a, b = _files(small), _files(again)
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] for k in a)
    other = str(tmp_path / 'other')
    write_synthetic_dataset(other, **{**SMALL, 'seed': 4})
    c = _files(other)
    assert c.keys() == a.keys()
    different = [k for k in a if a[k] != c[k]]
    assert any(k.endswith('_labels.npz') for k in different)
    assert any(k.endswith('depth/0000.png') for k in different)


@pytest.fixture(scope='module')
def stats(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('stats') / 'data')
    write_synthetic_dataset(root, scenes=1, frames=1, objects=3, models=3, points_per_object=300,
                            grid=(5, 3, 3), image_size=(64, 36), seed=7, progress=False,
                            cameras=('kinect',))
    return root


def _labels(root, m):
    g = np.load(os.path.join(root, 'grasp_label', f'{m:03d}_labels.npz'))
    return {k: g[k] for k in g.files}


def test_label_statistics(stats):
    col = np.load(os.path.join(stats, 'collision_label', 'scene_0000', 'collision_labels.npz'))
    ids = _scene_ids(stats, 0)
    for m in range(3):
        g = _labels(stats, m)
        scores, offsets = g['scores'], g['offsets']
        assert 270 <= len(scores) <= 330
        assert 0.9 <= (scores == -1).mean() <= 0.995  # most cells infeasible
        assert set(np.unique(scores)) <= {np.float32(-1), *MU_VALUES}
        assert len(np.unique(scores)) >= 5  # 5 views x 3 angles: few distinct jaw angles
        expected_angle = (np.arange(3) * np.pi / 12).astype(np.float32)
        assert np.array_equal(offsets[..., 0],
                              np.broadcast_to(expected_angle[:, None], scores.shape))
        expected_depth = np.float32([0.01, 0.02, 0.03])
        assert np.array_equal(offsets[..., 1], np.broadcast_to(expected_depth, scores.shape))
        width = offsets[..., 2]
        assert width[scores > 0].min() >= 0.01 and width[scores > 0].max() <= 0.1
        assert width.max() > 0.1  # chords wider than the gripper exist, and are infeasible
        collision = g['collision']
        assert not collision[scores <= 0].any() and 0.05 < collision[scores > 0].mean() < 0.95
        tol = np.load(os.path.join(stats, 'tolerance', f'{m:03d}_tolerance.npy'))
        assert np.isin(tol, TOLERANCE_RADII).all() and tol.max() > 0.01
        dists = np.linalg.norm(g['points'][:, None] - g['points'][None], axis=-1)
        for i in (0, 7, 150):  # graspnet-baseline's worker, literally
            expected = np.zeros(scores.shape[1:], np.float32)
            for r in [0.001 * x for x in range(51)]:
                ball = scores[dists[i] <= r]
                passing = ((ball > 0) & (ball <= 0.55)).mean(axis=0) >= 0.8
                if passing.sum() == 0:
                    break
                expected[passing] = r
            assert np.array_equal(tol[i], expected)
        if m in ids:
            scene = col[f'arr_{ids.index(m)}']
            assert np.all(scene >= collision) and not scene[scores <= 0].any()
            assert scene[scores > 0].mean() > collision[scores > 0].mean()


def _grasp_rotation(view, angle, num_views):
    """graspnet.md §2 written out: Fibonacci view, approach = -view, y = (-x_y, x_x, 0), Rx(a)."""
    phi = (np.sqrt(5) - 1) / 2
    zs = (2 * view + 1) / num_views - 1
    v = np.stack([np.sqrt(1 - zs ** 2) * np.cos(2 * np.pi * view * phi),
                  np.sqrt(1 - zs ** 2) * np.sin(2 * np.pi * view * phi), zs], -1)
    x = -v
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(len(x))], -1)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    z = np.cross(x, y)
    theta = angle * np.pi / 12
    c, s = np.cos(theta), np.sin(theta)
    rx = np.zeros((len(x), 3, 3))
    rx[:, 0, 0], rx[:, 1, 1], rx[:, 1, 2], rx[:, 2, 1], rx[:, 2, 2] = 1, c, -s, s, c
    return np.stack([x, y, z], -1) @ rx


def _contacts_by_marching(half, centre, axis, reach=0.3, steps=3000):
    """Where the line centre + t * axis enters/leaves the box, from the exact signed distance
    sampled along it and refined by bisection (no slab formula)."""
    t = np.linspace(-reach, reach, steps)
    pts = centre[:, None] + t[None, :, None] * axis[:, None]
    inside = box_signed_distance(half, pts) < 0
    out = []
    for side in (0, 1):
        idx = np.argmax(inside, 1) if side == 0 else steps - 1 - np.argmax(inside[:, ::-1], 1)
        lo = np.where(side == 0, t[np.maximum(idx - 1, 0)], t[idx])
        hi = np.where(side == 0, t[idx], t[np.minimum(idx + 1, steps - 1)])
        for _ in range(40):
            mid = (lo + hi) / 2
            d = box_signed_distance(half, centre + mid[:, None] * axis)
            go_in = d < 0 if side == 0 else d >= 0
            lo, hi = np.where(go_in, lo, mid), np.where(go_in, mid, hi)
        out.append((lo + hi) / 2)
    return out


def _normal(half, q, eps=1e-5):
    grad = np.stack([box_signed_distance(half, q + eps * e) - box_signed_distance(half, q - eps * e)
                     for e in np.eye(3)], -1)
    return grad / np.linalg.norm(grad, axis=-1, keepdims=True)


def test_max_label_width_keeps_wider_chords_feasible(stats, tmp_path):
    """By default no feasible cell is wider than the gripper's 0.1 m; max_label_width=0.14 keeps
    μ for chords up to 0.14 m and changes nothing else about the narrower cells."""
    wide = str(tmp_path / 'wide')
    write_synthetic_dataset(wide, scenes=1, frames=1, objects=3, models=3, points_per_object=300,
                            grid=(5, 3, 3), image_size=(64, 36), seed=7, progress=False,
                            cameras=('kinect',), max_label_width=0.14)
    for m in range(3):
        narrow, broad = _labels(stats, m), _labels(wide, m)
        w = broad['offsets'][..., 2]
        assert np.array_equal(narrow['offsets'], broad['offsets'])
        kept = w <= 0.1
        assert np.array_equal(narrow['scores'][kept], broad['scores'][kept])
        assert (narrow['scores'][~kept] == -1).all()
        assert w[broad['scores'] > 0].max() <= 0.14
    assert any((_labels(wide, m)['scores'][_labels(wide, m)['offsets'][..., 2] > 0.1] > 0).any()
               for m in range(3))


def test_labels_follow_the_physics(stats):
    """Independently: contacts by marching the exact SDF, normals by its gradient, dexnet's
    antipodal friction test, the smallest passing mu of the 0.1 grid; contacts near an edge of
    their face or next to the jaw centre (where dexnet's samples end), and widths over 0.1 m,
    rejected."""
    from mmgrasp.datasets.synthetic.labels import CENTRE_MARGIN, EDGE_MARGIN
    rng = np.random.default_rng(0)
    for m in range(3):
        g = _labels(stats, m)
        half = model_half_extents(7, m)
        scores, width = g['scores'], g['offsets'][..., 2]
        cells = np.concatenate([rng.choice(np.flatnonzero(scores > 0), 150),
                                rng.choice(scores.size, 150)])
        pi, vi, ai, di = np.unravel_index(cells, scores.shape)
        rot = _grasp_rotation(vi, ai, 5)
        centre = g['points'][pi].astype(np.float64) + (di + 1)[:, None] * 0.01 * rot[..., 0]
        inside = box_signed_distance(half, centre) < 0
        axis = rot[..., 1]
        t1, t2 = _contacts_by_marching(half, centre, axis)
        q1, q2 = centre + t1[:, None] * axis, centre + t2[:, None] * axis
        mu = np.full(len(cells), -1.0)
        for k, fric in enumerate(np.round(np.arange(1, 11) * 0.1, 1)[::-1]):
            holds = np.ones(len(cells), bool)
            for q, other in ((q1, q2), (q2, q1)):
                diff = other - q
                proj = np.abs(np.einsum('ij,ij->i', -_normal(half, q), diff))
                holds &= np.arccos(proj / np.linalg.norm(diff, axis=1)) <= np.arctan(fric)
            mu = np.where(holds, fric, mu)
        for q in (q1, q2):  # the contact's distance to the border of its face
            rim = np.sort(half - np.abs(q), axis=1)[:, 1]
            mu = np.where(rim >= EDGE_MARGIN, mu, -1.0)
        expected_width = 2 * np.maximum(-t1, t2) + 0.01
        mu = np.where(inside & (np.minimum(-t1, t2) >= CENTRE_MARGIN) & (expected_width <= 0.1),
                      mu, -1.0)  # graspnetAPI clips widths to 0.1: a wider grasp cannot hold
        np.testing.assert_array_equal(scores.reshape(-1)[cells], mu.astype(np.float32))
        np.testing.assert_allclose(width.reshape(-1)[cells][inside], expected_width[inside],
                                   atol=1e-6)


def test_analytic_contacts_equal_eval_jaw_closing(stats):
    """On the written textured.sdf, the evaluator's dexnet jaw closing finds the labels' contacts
    and face normals, and its force-closure test gives the labels' mu (and, on graspnetAPI's
    0.2 grid, the next coefficient up). Sampled cells keep both jaw lines inside the SDF grid."""
    from mmgrasp.evaluation.functional import EVAL_FRICTION_COEFFICIENTS, grasp_friction
    from mmgrasp.geometry import close_jaws, read_dexnet_sdf
    from mmgrasp.datasets.synthetic.labels import MU_GRID
    rng = np.random.default_rng(3)
    for m in range(3):
        g = _labels(stats, m)
        half = model_half_extents(7, m)
        sdf = read_dexnet_sdf(os.path.join(stats, 'models', f'{m:03d}', 'textured.sdf'))
        scores, width = g['scores'], g['offsets'][..., 2]
        pool = np.flatnonzero(scores > 0)
        cells = rng.choice(pool, min(800, len(pool)), replace=False)
        pi, vi, ai, di = np.unravel_index(cells, scores.shape)
        rot = _grasp_rotation(vi, ai, 5)
        centre = g['points'][pi].astype(np.float64) + (di + 1)[:, None] * 0.01 * rot[..., 0]
        w = width.reshape(-1)[cells].astype(np.float64)
        ends = [sdf.to_grid(centre + s * (w / 2)[:, None] * rot[..., 1]) for s in (-1, 1)]
        keep = np.all([(e >= 0).all(1) & (e < np.array(sdf.dims) - 1).all(1) for e in ends], 0)
        assert keep.sum() >= 20
        cells, centre, rot, w, di = cells[keep], centre[keep], rot[keep], w[keep], di[keep]
        found, points, normals = close_jaws(sdf, centre, rot[..., 1], w)
        assert found.all()
        t1, t2 = _contacts_by_marching(half, centre, rot[..., 1])
        for j, t in enumerate((t1, t2)):
            q = centre + t[:, None] * rot[..., 1]
            np.testing.assert_allclose(points[:, j], q, atol=2e-6)
            np.testing.assert_allclose(normals[:, j], _normal(half, q), atol=1e-5)
        rows = np.zeros((len(cells), 17))
        rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = 1, w, 0.02, (di + 1) * 0.01
        rows[:, 4:13] = rot.reshape(-1, 9)
        rows[:, 13:16] = g['points'][np.unravel_index(cells, scores.shape)[0]]
        mu = scores.reshape(-1)[cells]
        np.testing.assert_array_equal(
            grasp_friction(rows, np.eye(4), sdf, MU_GRID).astype(np.float32), mu)
        mu = np.round(mu.astype(np.float64), 1)
        coarse = np.asarray(sorted(EVAL_FRICTION_COEFFICIENTS))
        expected = coarse[np.searchsorted(coarse, mu - 1e-9)]
        np.testing.assert_allclose(grasp_friction(rows, np.eye(4), sdf), expected)


def _in_gripper(points, origin, rot, width, depth):
    """graspnetAPI's collision_detection masks: (fingers or base hit, inner point count)."""
    target = np.einsum('nkj,nji->nki', points[None] - origin[:, None], rot)
    x, y, z = target[..., 0], target[..., 1], target[..., 2]
    w, d = width[:, None] / 2, depth[:, None]
    band = (z > -0.01) & (z < 0.01)
    along = (x > -0.02) & (x < d)
    left = band & along & (y > -w - 0.01) & (y < -w)
    right = band & along & (y < w + 0.01) & (y > w)
    base = band & (y > -w - 0.01) & (y < w + 0.01) & (x > -0.03) & (x < -0.02)
    inner = band & along & (y >= -w) & (y <= w)
    return (left | right | base).any(1), inner.sum(1)


def _deepest_part_point(half, origin, rot, width, depth):
    """Smallest box signed distance over a 40x40x20 sampling of each finger and the base."""
    best = np.inf
    for x0, x1, y0, y1 in ((-0.02, depth, -width / 2 - 0.01, -width / 2),
                           (-0.02, depth, width / 2, width / 2 + 0.01),
                           (-0.03, -0.02, -width / 2 - 0.01, width / 2 + 0.01)):
        g = np.stack(np.meshgrid(np.linspace(x0, x1, 40), np.linspace(y0, y1, 40),
                                 np.linspace(-0.01, 0.01, 20), indexing='ij'), -1).reshape(-1, 3)
        best = min(best, box_signed_distance(half, origin + g @ rot.T).min())
    return best


def test_self_collision(stats):
    """Cells labelled free have no box surface point (2.5 mm grid) in a finger or the base under
    graspnetAPI's rule; cells labelled colliding have a finger or base point inside the box."""
    from mmgrasp.datasets.synthetic import box_surface_grid
    rng = np.random.default_rng(1)
    for m in range(3):
        g = _labels(stats, m)
        half = model_half_extents(7, m)
        scores, width, collision = g['scores'], g['offsets'][..., 2], g['collision']
        for want in (False, True):
            pool = np.flatnonzero((scores > 0) & (collision == want))
            cells = rng.choice(pool, min(60, len(pool)), replace=False)
            pi, vi, ai, di = np.unravel_index(cells, scores.shape)
            origin, rot = g['points'][pi].astype(np.float64), _grasp_rotation(vi, ai, 5)
            w, depth = width.reshape(-1)[cells], (di + 1) * 0.01
            if want:
                deepest = [_deepest_part_point(half, origin[k], rot[k], w[k], depth[k])
                           for k in range(len(cells))]
                assert np.mean(np.array(deepest) < 0) > 0.9  # overlaps thinner than the sampling

            else:
                hit, _ = _in_gripper(box_surface_grid(half), origin, rot, w, depth)
                assert not hit.any()


def test_scene_collision_table_and_neighbours(stats):
    """Free cells of the scene keep the gripper above the table and off the other boxes (their
    surface points, graspnetAPI's rule); label points on a bottom face rest on the table, so no
    grasp there is free."""
    from mmgrasp.datasets.synthetic import box_surface_grid
    ids = _scene_ids(stats, 0)
    meta = scipy.io.loadmat(os.path.join(stats, 'scenes', 'scene_0000', 'kinect', 'meta',
                                         '0000.mat'))
    cdir = os.path.join(stats, 'scenes', 'scene_0000', 'kinect')
    cam_to_table = np.load(os.path.join(cdir, 'cam0_wrt_table.npy'))
    col = np.load(os.path.join(stats, 'collision_label', 'scene_0000', 'collision_labels.npz'))
    to_table = []
    for i in range(len(ids)):
        pose = np.eye(4)
        pose[:3] = meta['poses'][..., i]
        to_table.append(cam_to_table @ pose)
    rng = np.random.default_rng(2)
    for i, m in enumerate(ids):
        g = _labels(stats, m)
        scene = col[f'arr_{i}']
        free = np.flatnonzero((g['scores'] > 0) & ~scene)
        cells = rng.choice(free, min(150, len(free)), replace=False)
        pi, vi, ai, di = np.unravel_index(cells, scene.shape)
        rot = _grasp_rotation(vi, ai, 5)
        pose = to_table[i]
        origin = g['points'][pi].astype(np.float64) @ pose[:3, :3].T + pose[:3, 3]
        rot_t = np.einsum('ij,njk->nik', pose[:3, :3], rot)
        width, depth = g['offsets'][..., 2].reshape(-1)[cells], (di + 1) * 0.01
        for sx in (-0.03, 1):
            for sy in (-1, 1):
                for sz in (-0.01, 0.01):
                    corner = np.stack([np.where(sx == 1, depth, sx), sy * (width / 2 + 0.01),
                                       np.full(len(cells), sz)], 1)
                    assert np.all((origin + np.einsum('nij,nj->ni', rot_t, corner))[:, 2] > -1e-9)
        for k, other in enumerate(ids):
            if k != i:
                pts = box_surface_grid(model_half_extents(7, other))
                pts = pts @ to_table[k][:3, :3].T + to_table[k][:3, 3]
                hit, inner = _in_gripper(pts, origin, rot_t, width, depth)
                assert not hit.any() and not inner.any()
        bottom = np.abs(g['points'][:, 2] + model_half_extents(7, m)[2]) < 1e-6
        assert bottom.any() and not ((g['scores'] > 0) & ~scene)[bottom].any()


def test_depth_label_consistency(small):
    for s in SCENES:
        ids = _scene_ids(small, s)
        for cam in CAMERAS:
            cdir = os.path.join(small, 'scenes', f'scene_{s:04d}', cam)
            K = np.load(os.path.join(cdir, 'camK.npy'))
            cam0 = np.load(os.path.join(cdir, 'cam0_wrt_table.npy'))
            cposes = np.load(os.path.join(cdir, 'camera_poses.npy'))
            for f in range(SMALL['frames']):
                depth = _png(cdir, 'depth', f)
                label = _png(cdir, 'label', f)
                poses = scipy.io.loadmat(os.path.join(cdir, 'meta', f'{f:04d}.mat'))['poses']
                assert np.all(depth[label > 0] > 0)
                v, u = np.nonzero(depth > 0)
                z = depth[v, u] / 1000.0
                cloud = np.stack([(u - K[0, 2]) * z / K[0, 0], (v - K[1, 2]) * z / K[1, 1], z], 1)
                for i, m in enumerate(ids):
                    sel = label[v, u] == m + 1
                    assert sel.sum() > 20, 'every object is visible in the small scenes'
                    r, t = poses[:, :3, i].astype(np.float64), poses[:, 3, i].astype(np.float64)
                    local = (cloud[sel] - t) @ r  # camera -> model frame
                    half = model_half_extents(SMALL['seed'], m)
                    q = np.abs(local) - half
                    outside = np.linalg.norm(np.maximum(q, 0), axis=1)
                    dist = np.where(q.max(1) > 0, outside, -q.max(1))
                    assert np.abs(dist).max() < 0.002
                # table pixels back-project onto z=0 of the table frame (through the camera pose)
                table = (label[v, u] == 0)
                world = cloud[table] @ (cam0 @ cposes[f])[:3, :3].T + (cam0 @ cposes[f])[:3, 3]
                assert np.abs(world[:, 2]).max() < 0.004
                assert np.abs(world[:, :2]).max() <= 0.5 + 0.005  # +-1 mm noise at grazing rays


def test_duplicates(tmp_path):
    root = str(tmp_path / 'dup')
    write_synthetic_dataset(root, **{**SMALL, 'duplicates': 1, 'scenes': 2})
    ids0, ids1 = _scene_ids(root, 0), _scene_ids(root, 1)
    assert len(ids0) == 3 and len(set(ids0)) == 2
    assert len(set(ids1)) == 3
    meta = scipy.io.loadmat(os.path.join(root, 'scenes', 'scene_0000', 'kinect', 'meta',
                                         '0000.mat'))
    np.testing.assert_array_equal(meta['cls_indexes'], [[m + 1 for m in ids0]])
    col = np.load(os.path.join(root, 'collision_label', 'scene_0000', 'collision_labels.npz'))
    assert len(col.files) == 3
    dup = max(set(ids0), key=ids0.count)
    i, j = [k for k, m in enumerate(ids0) if m == dup]
    assert col[f'arr_{i}'].shape == col[f'arr_{j}'].shape
    assert not np.array_equal(meta['poses'][..., i], meta['poses'][..., j])


def test_refuses_existing_output(tmp_path):
    out = tmp_path / 'busy'
    out.mkdir()
    (out / 'keep.txt').write_text('x')
    with pytest.raises(FileExistsError, match='busy'):
        write_synthetic_dataset(str(out), **SMALL)
    assert os.listdir(out) == ['keep.txt']
    assert os.listdir(tmp_path) == ['busy']
    empty = tmp_path / 'empty'
    empty.mkdir()
    write_synthetic_dataset(str(empty), **{**SMALL, 'scenes': 1, 'frames': 1})
    assert os.path.isdir(empty / 'scenes' / 'scene_0000')
    with pytest.raises(ValueError):
        write_synthetic_dataset(str(tmp_path / 'bad'), objects=3, models=89, progress=False)


@pytest.mark.slow
def test_cli(tmp_path):
    out = str(tmp_path / 'cli')
    cmd = [sys.executable, os.path.join(REPO, 'tools', 'data', 'make_synthetic.py'), out,
           '--scenes', '1', '--frames', '1', '--objects', '2', '--points-per-object', '20',
           '--grid', '5', '3', '3', '--image-size', '64', '36', '--cameras', 'kinect',
           '--seed', '1']
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    assert 'scene 0000' in res.stderr and 'object 000' in res.stderr
    assert os.listdir(os.path.join(out, 'scenes', 'scene_0000')) != []
    assert not os.path.exists(os.path.join(out, 'scenes', 'scene_0000', 'realsense'))
    g = np.load(os.path.join(out, 'grasp_label', '003_labels.npz'))
    assert g['scores'].shape[1:] == (5, 3, 3)
    # an existing output is refused: the script's main() in this process (what it runs)
    make_synthetic = script_module('tools/data/make_synthetic.py')
    with pytest.raises(SystemExit, match=f'make_synthetic: error: .*{re.escape(out)}'):
        make_synthetic.main(cmd[2:])
