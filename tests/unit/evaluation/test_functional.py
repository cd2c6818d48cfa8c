"""The evaluation's array functions against small hand-computed cases."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mmgrasp.evaluation.functional import evaluate_frame, grasp_nms, precision_at_k
from mmgrasp.geometry import (ModelFreeCollisionDetector, SignedDistanceField, antipodal_angles,
                              close_jaws, filter_collisions, force_closure,
                              force_closure_min_friction, gripper_collision,
                              quaternion_to_graspnet_pose, read_dexnet_sdf, table_points,
                              voxel_downsample, write_dexnet_sdf)


def grasp_row(score=1.0, width=0.05, height=0.02, depth=0.02, rot=np.eye(3), t=(0, 0, 0)):
    return np.concatenate([[score, width, height, depth], np.asarray(rot).reshape(-1), t, [-1]])


def rot_z(deg):
    return Rotation.from_euler('z', deg, degrees=True).as_matrix()


# NMS ----------------------------------------------------------------------------------------
def test_nms_suppresses_only_close_in_translation_and_rotation():
    rows = np.stack([
        grasp_row(0.9),                                   # kept: best
        grasp_row(0.8, t=(0.02, 0, 0)),                   # 2 cm, same rotation: dropped
        grasp_row(0.7, t=(0.04, 0, 0)),                   # 4 cm: kept
        grasp_row(0.6, rot=rot_z(40), t=(0.01, 0, 0)),    # 40 deg: kept
        grasp_row(0.5, rot=rot_z(20), t=(0.0, 0.01, 0)),  # 20 deg, 1 cm: dropped by the first
        grasp_row(0.95, t=(0.045, 0.0, 0)),               # best overall, drops the 0.7 one
    ])
    kept = grasp_nms(rows)
    assert kept[:, 0].tolist() == [0.95, 0.9, 0.6]
    assert kept.dtype == np.float64


def test_nms_greedy_chain_keeps_the_third():
    # a suppresses b, b would have suppressed c, but b is gone: c stays (greedy, not transitive)
    rows = np.stack([grasp_row(0.9, t=(0, 0, 0)), grasp_row(0.8, t=(0.025, 0, 0)),
                     grasp_row(0.7, t=(0.05, 0, 0))])
    assert grasp_nms(rows)[:, 0].tolist() == [0.9, 0.7]
    assert grasp_nms(rows, translation_thresh=0.06)[:, 0].tolist() == [0.9]
    assert grasp_nms(np.zeros((0, 17))).shape == (0, 17)


# points -------------------------------------------------------------------------------------
def test_voxel_downsample_open3d_rule():
    # bound = min - 0.5: voxel of x is floor(x + 0.5) for a voxel of 1 and min 0
    pts = np.array([[0.0, 0, 0], [0.4, 0, 0], [0.6, 0, 0], [1.4, 0, 0], [2.6, 0, 0]])
    out = voxel_downsample(pts, 1.0)
    np.testing.assert_allclose(out[:, 0], [0.2, 1.0, 2.6])
    assert voxel_downsample(np.zeros((0, 3)), 0.01).shape == (0, 3)


def test_table_points_grid():
    t = table_points()
    assert t.shape == (125 * 125 * 6, 3)
    np.testing.assert_allclose(t.min(0), [-0.5, -0.5, -0.05])
    np.testing.assert_allclose(t.max(0), [0.5, 0.5, 0.0])


def test_quaternion_pose_matches_scipy_and_is_float32():
    q = np.array([0.3, -0.5, 0.7, 0.2])
    q /= np.linalg.norm(q)
    pose = quaternion_to_graspnet_pose([0.1, 0.2, 0.3], q)
    assert pose.dtype == np.float32
    ref = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()
    np.testing.assert_allclose(pose[:3, :3], ref, atol=1e-6)
    np.testing.assert_allclose(pose[:3, 3], [0.1, 0.2, 0.3], atol=1e-7)
    # gimbal lock (pitch 90 degrees) takes the other branch and still reproduces the matrix
    r = Rotation.from_euler('xyz', [0.3, 90, 0], degrees=True)
    x, y, z, w = r.as_quat()
    np.testing.assert_allclose(quaternion_to_graspnet_pose([0, 0, 0], [w, x, y, z])[:3, :3],
                               r.as_matrix(), atol=1e-6)


# gripper ------------------------------------------------------------------------------------
def test_gripper_collision_fingers_bottom_inner():
    g = grasp_row(width=0.04, depth=0.02)[None]
    inner = np.array([[0.01, y, 0.0] for y in np.linspace(-0.015, 0.015, 12)])
    coll, empty = gripper_collision(g, inner)
    assert not coll[0] and not empty[0]
    coll, empty = gripper_collision(g, inner[:9])  # 9 inner points < 10: empty
    assert coll[0] and empty[0]
    for bad in ([0.01, 0.025, 0.0],     # in the right finger (0.02 < y < 0.03)
                [0.01, -0.025, 0.0],    # left finger
                [-0.025, 0.0, 0.0]):    # the bar behind the palm (-0.03 < x < -0.02)
        coll, empty = gripper_collision(g, np.vstack([inner, bad]))
        assert coll[0] and not empty[0], bad
    for fine in ([0.01, 0.025, 0.011],  # above the jaw height
                 [0.03, 0.025, 0.0],    # beyond the finger tips (x > depth)
                 [-0.035, 0.0, 0.0]):   # behind the bar
        coll, _ = gripper_collision(g, np.vstack([inner, fine]))
        assert not coll[0], fine


def test_gripper_collision_rotated_grasp():
    rot = rot_z(90)  # approach along +y, jaws along -x
    g = grasp_row(width=0.04, depth=0.02, rot=rot, t=(0.1, 0, 0))[None]
    inner = np.array([[0.1 + x, 0.01, 0.0] for x in np.linspace(-0.015, 0.015, 12)])
    assert not gripper_collision(g, inner)[0][0]
    assert gripper_collision(g, np.vstack([inner, [[0.125, 0.01, 0]]]))[0][0]


def test_model_free_collision_threshold():
    g = grasp_row(width=0.04, height=0.02, depth=0.02)[None]
    # points in the right finger: finger volume 0.02*0.06*0.01 = 1.2e-5 m^3
    finger = np.array([[x, 0.025, 0.0] for x in np.linspace(-0.035, 0.015, 6)])
    det = ModelFreeCollisionDetector(finger, voxel_size=0.01)
    assert len(det.scene_points) == 6
    volume = (0.02 * 0.06 * 0.01 * 2 + 0.02 * 0.06 * 0.01 + 0.02 * 0.06 * 0.05) / 1e-6
    assert det.detect(g, approach_dist=0.05, collision_thresh=5.9 / volume)[0]
    assert not det.detect(g, approach_dist=0.05, collision_thresh=6.1 / volume)[0]
    assert len(filter_collisions(g, finger, collision_thresh=0.0)) == 1
    assert len(filter_collisions(g, finger, 0.01, 0.05, 0.01)) == 0


# SDF and contacts ---------------------------------------------------------------------------
def sphere_sdf(radius=0.03, res=0.002, n=61):
    origin = np.full(3, -(n - 1) / 2 * res)
    grid = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing='ij'), -1) * res + origin
    # same zero set and unit gradient on it as the exact distance, but curved along lines
    data = (np.sum(grid ** 2, axis=-1) - radius ** 2) / (2 * radius)
    return SignedDistanceField(data, origin, res)


def test_sdf_file_round_trip(tmp_path):
    sdf = sphere_sdf(n=21)
    path = tmp_path / 'm.sdf'
    write_dexnet_sdf(path, sdf.data, sdf.origin, sdf.resolution)
    back = read_dexnet_sdf(path)
    np.testing.assert_allclose(back.data, sdf.data, atol=1e-10)
    np.testing.assert_allclose(back.origin, sdf.origin)
    lines = path.read_text().split('\n')
    assert lines[0] == '21 21 21'
    # x fastest: the 2nd value is cell (1, 0, 0)
    assert float(lines[4]) == pytest.approx(sdf.data[1, 0, 0])
    (tmp_path / 'bad.sdf').write_text('2 2 2\n0 0 0\n0.1\n1\n2\n')
    with pytest.raises(ValueError, match='bad.sdf'):
        read_dexnet_sdf(tmp_path / 'bad.sdf')


def test_sdf_trilinear_and_outside():
    sdf = sphere_sdf()
    cell = np.array([[30.0, 30.0, 30.0]])
    assert sdf(cell)[0] == pytest.approx(sdf.data[30, 30, 30])
    mid = np.array([[30.5, 30.0, 30.0]])
    assert sdf(mid)[0] == pytest.approx(sdf.data[30:32, 30, 30].mean())
    # between the last cell and the grid's end dexnet snaps onto the last cell
    edge = np.array([[60.5, 30.0, 30.0]])
    assert sdf(edge)[0] == pytest.approx(sdf.data[60, 30, 30])
    far = np.array([[-10.0, 30.0, 30.0]])  # 0.08 m from the centre, off the grid
    assert sdf(far)[0] == pytest.approx(0.05, abs=2e-3)


def test_close_jaws_on_a_sphere():
    sdf = sphere_sdf()
    centres = np.array([[0, 0, 0], [0, 0.01, 0], [0, 0.029, 0], [0, 0.05, 0]], float)
    axes = np.tile([1.0, 0, 0], (4, 1))
    found, pts, normals = close_jaws(sdf, centres, axes, np.full(4, 0.08))
    assert found.tolist() == [True, True, True, False]
    for k, y in enumerate([0.0, 0.01, 0.029]):
        x = np.sqrt(0.03 ** 2 - y ** 2)
        np.testing.assert_allclose(pts[k, 0], [-x, y, 0], atol=2e-4)  # a tenth of a cell
        np.testing.assert_allclose(pts[k, 1], [x, y, 0], atol=2e-4)
        # unit outward normals, radial up to the plane fit's error (largest when grazing)
        np.testing.assert_allclose(np.linalg.norm(normals[k], axis=1), 1, atol=1e-6)
        assert np.einsum('ij,ij->i', normals[k], pts[k] / 0.03).min() > 0.99
    assert np.isnan(pts[3]).all()
    # jaws that stop short of the surface find nothing
    found, _, _ = close_jaws(sdf, centres[:1], axes[:1], np.array([0.04]))
    assert not found[0]


def test_exactly_linear_sdf_finds_no_contact():
    # dexnet's quadratic fit needs curvature: an exact distance is linear along a radius
    sdf = sphere_sdf()
    grid = np.stack(np.meshgrid(*[np.arange(61)] * 3, indexing='ij'), -1) * 0.002 + sdf.origin
    linear = SignedDistanceField(np.linalg.norm(grid, axis=-1) - 0.03, sdf.origin, 0.002)
    found, _, _ = close_jaws(linear, np.zeros((1, 3)), np.array([[1.0, 0, 0]]), [0.08])
    assert not found[0]


# force closure ------------------------------------------------------------------------------
def test_force_closure_antipodal_and_not():
    c1, c2 = np.array([[-0.03, 0, 0]]), np.array([[0.03, 0, 0]])
    n1, n2 = np.array([[-1.0, 0, 0]]), np.array([[1.0, 0, 0]])
    assert force_closure_min_friction(c1, n1, c2, n2)[0] == 0.2
    # tilt one normal by 30 degrees: tan 30 = 0.577 -> needs 0.6
    t = np.deg2rad(30)
    tilted = np.array([[np.cos(t), np.sin(t), 0]])
    assert antipodal_angles(c1, n1, c2, tilted)[0] == pytest.approx(t)
    assert force_closure_min_friction(c1, n1, c2, tilted)[0] == 0.6
    assert force_closure(c1, n1, c2, tilted, 0.6)[0]
    assert not force_closure(c1, n1, c2, tilted, 0.5)[0]
    # 50 degrees: tan 50 = 1.19 -> 1.2; 55 degrees: none
    for deg, want in ((50, 1.2), (55, -1.0)):
        t = np.deg2rad(deg)
        n = np.array([[np.cos(t), np.sin(t), 0]])
        assert force_closure_min_friction(c1, n1, c2, n)[0] == want
    # the sign of a normal does not matter; coincident points never close
    assert force_closure_min_friction(c1, -n1, c2, n2)[0] == 0.2
    assert force_closure_min_friction(c1, n1, c1, n2)[0] == -1.0
    assert force_closure_min_friction(c1, np.full((1, 3), np.nan), c2, n2)[0] == -1.0


# accuracy -----------------------------------------------------------------------------------
def test_precision_at_k():
    scores = np.array([0.2, -1.0, 0.8, 1.2])
    acc = precision_at_k(scores, top_k=6)
    # columns mu = 0.2, 0.4, 0.6, 0.8, 1.0, 1.2
    np.testing.assert_allclose(acc[0], [1, 1, 1, 1, 1, 1])
    np.testing.assert_allclose(acc[2], [1 / 3, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3])
    np.testing.assert_allclose(acc[3], [1 / 4, 1 / 4, 1 / 4, 2 / 4, 2 / 4, 3 / 4])
    np.testing.assert_allclose(acc[5], [1 / 6, 1 / 6, 1 / 6, 2 / 6, 2 / 6, 3 / 6])


def test_evaluate_frame_empty_and_sphere():
    sdf = sphere_sdf()
    model = sdf.surface_cells * sdf.resolution + sdf.origin
    model = voxel_downsample(model, 0.008)
    pose = np.eye(4, dtype=np.float32)
    pose[2, 3] = 0.5
    out = evaluate_frame(np.zeros((0, 17), np.float32), [model], [sdf], [pose], None)
    assert out['accuracy'].shape == (50, 6) and not out['accuracy'].any()
    # approach along +z (camera looks down z), jaws along x, through the sphere's centre
    rot = np.stack([[0, 0, 1.0], [1.0, 0, 0], [0, 1.0, 0]], axis=1)  # columns: approach, jaw, z
    good = grasp_row(0.9, width=0.08, depth=0.02, rot=rot, t=(0, 0, 0.48))
    off = grasp_row(0.5, width=0.08, depth=0.02, rot=rot, t=(0, 0.027, 0.48))
    out = evaluate_frame(np.stack([good, off]).astype(np.float32), [model], [sdf], [pose], None)
    assert out['scores'].tolist()[0] == 0.2
    assert out['accuracy'][0].tolist() == [1.0] * 6
