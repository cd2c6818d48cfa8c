"""Tests of the synthetic GraspNet-layout writer (mmgrasp.datasets.synthetic)."""
import os
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


def test_label_statistics(tmp_path):
    root = str(tmp_path / 'stats')
    write_synthetic_dataset(root, scenes=1, frames=1, objects=2, models=3, points_per_object=300,
                            grid=(5, 3, 3), image_size=(64, 36), seed=7, progress=False)
    for m in range(3):
        g = np.load(os.path.join(root, 'grasp_label', f'{m:03d}_labels.npz'))
        scores, offsets = g['scores'], g['offsets']
        assert 270 <= len(scores) <= 330
        assert 0.93 <= (scores == -1).mean() <= 0.98
        assert np.array_equal(np.unique(scores), np.append(np.float32(-1), MU_VALUES))
        assert len(np.unique(scores)) == 11
        expected_angle = (np.arange(3) * np.pi / 12).astype(np.float32)
        assert np.array_equal(offsets[..., 0],
                              np.broadcast_to(expected_angle[:, None], scores.shape))
        expected_depth = np.float32([0.01, 0.02, 0.03])
        assert np.array_equal(offsets[..., 1], np.broadcast_to(expected_depth, scores.shape))
        width = offsets[..., 2]
        assert width.max() > 0.1 and width.min() >= 0.005 and width.max() <= 0.12
        assert 0.03 < g['collision'].mean() < 0.07
        tol = np.load(os.path.join(root, 'tolerance', f'{m:03d}_tolerance.npy'))
        assert np.all(tol[scores == -1] == 0)
        assert np.isin(tol, TOLERANCE_RADII).all() and tol.max() > 0.04
    col = np.load(os.path.join(root, 'collision_label', 'scene_0000', 'collision_labels.npz'))
    for k in col.files:
        assert 0.08 < col[k].mean() < 0.22


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
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode != 0 and out in res.stderr
