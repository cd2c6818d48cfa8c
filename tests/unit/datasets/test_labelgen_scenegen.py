"""Generated scenes: dropped boxes end at rest and apart, checked on the meshes exactly (a point
of one box inside another by its half-spaces), the mesh checks catch a box pushed into another
or lifted off its support, GraspNet's 256 camera poses, Nguyen et al.'s depth noise, the ids."""
import numpy as np
import pytest

trimesh = pytest.importorskip('trimesh')
pytest.importorskip('pybullet')

from mmgrasp.datasets.labelgen import scenegen  # noqa: E402
from mmgrasp.datasets.labelgen.mesh import TriangleMesh, sample_surface  # noqa: E402
from mmgrasp.datasets.synthetic.graspnet import RS_WRT_KN  # noqa: E402

HALVES = [np.array(h) for h in ([0.03, 0.02, 0.015], [0.025, 0.025, 0.02], [0.04, 0.015, 0.01],
                                [0.02, 0.02, 0.02])]


@pytest.fixture(scope='module')
def dropped(tmp_path_factory):
    """Four boxes dropped once (scene 3 of seed 0), with their convex parts."""
    folder = tmp_path_factory.mktemp('parts')
    meshes = [TriangleMesh(np.asarray(b.vertices, np.float64), np.asarray(b.faces, np.int64))
              for b in (trimesh.creation.box(extents=2 * h) for h in HALVES)]
    parts = [scenegen.convex_parts(m, str(folder / f'{i}.obj')) for i, m in enumerate(meshes)]
    return meshes, parts, scenegen.drop_scene(meshes, parts, seed=0, scene=3)


def _inside_depth(points, half, pose):
    """How deep the deepest point lies inside the box (half extents, pose); <= 0: none inside."""
    local = (points - pose[:3, 3]) @ pose[:3, :3]
    return float((half - np.abs(local)).min(1).max())


def test_dropped_boxes_rest_apart_on_the_table(dropped):
    meshes, parts, poses = dropped
    posed = [m.vertices @ p[:3, :3].T + p[:3, 3] for m, p in zip(meshes, poses)]
    surfaces = [sample_surface(m, 2000, 1) @ p[:3, :3].T + p[:3, 3]
                for m, p in zip(meshes, poses)]
    for i, pts in enumerate(surfaces):
        assert pts[:, 2].min() > -scenegen.PENETRATION  # not in the table
        for j, (half, pose) in enumerate(zip(HALVES, poses)):
            if i != j:
                assert _inside_depth(np.concatenate([pts, posed[i]]), half, pose) \
                    < scenegen.PENETRATION
    # at rest: each box lies with a face (three corners within the contact distance) on the
    # table or on another box
    for i, verts in enumerate(posed):
        low = np.sort(verts[:, 2])[:3]
        on_table = low.max() < scenegen.CONTACT
        on_box = any(np.sort([-_inside_depth(v[None], HALVES[j], poses[j]) for v in verts])[2]
                     < scenegen.CONTACT for j in range(len(meshes)) if j != i)
        assert on_table or on_box, (i, low)


def test_mesh_checks_catch_penetration_and_floating(dropped):
    meshes, _, poses = dropped
    depth, below, gaps = scenegen.mesh_contacts(meshes, poses)
    assert depth <= scenegen.PENETRATION and below <= scenegen.PENETRATION
    assert max(gaps) <= scenegen.CONTACT
    pushed = [p.copy() for p in poses]
    pushed[1][:3, 3] = poses[0][:3, 3] + [0.01, 0, 0]  # box 1 into box 0
    assert scenegen.mesh_contacts(meshes, pushed)[0] > 0.005
    sunk = [p.copy() for p in poses]
    sunk[2][2, 3] -= 0.01
    assert scenegen.mesh_contacts(meshes, sunk)[1] > 0.007
    lifted = [p.copy() for p in poses]
    lifted[3][2, 3] += 0.3  # far above everything
    assert scenegen.mesh_contacts(meshes, lifted)[2][3] > 0.2


def test_drops_follow_the_seed(dropped):
    meshes, parts, poses = dropped
    again = scenegen.drop_scene(meshes, parts, seed=0, scene=3)
    np.testing.assert_array_equal(np.stack(again), np.stack(poses))
    other = scenegen.drop_scene(meshes, parts, seed=0, scene=4)
    assert np.abs(np.stack(other) - np.stack(poses)).max() > 0.01


def test_camera_poses_graspnet_trajectory():
    kinect = scenegen.camera_poses('kinect')
    assert kinect.shape == (256, 4, 4)
    np.testing.assert_allclose(np.linalg.norm(kinect[:, :3, 3], axis=1), 0.55)
    np.testing.assert_allclose(kinect[:, :3, :3].transpose(0, 2, 1) @ kinect[:, :3, :3],
                               np.broadcast_to(np.eye(3), (256, 3, 3)), atol=1e-12)
    to_centre = np.array([0, 0, 0.02]) - kinect[:, :3, 3]
    cos = (to_centre * kinect[:, :3, 2]).sum(1) / np.linalg.norm(to_centre, axis=1)
    np.testing.assert_allclose(cos, 1.0)  # optical axes on the table centre
    steps = np.linalg.norm(np.diff(kinect[:, :3, 3], axis=0), axis=1)
    assert steps.max() < 0.06  # one continuous path, back and forth
    np.testing.assert_allclose(scenegen.camera_poses('realsense'), kinect @ RS_WRT_KN)
    four = scenegen.camera_poses('kinect', 4)
    np.testing.assert_array_equal(four, kinect[[0, 85, 170, 255]])


def test_depth_noise_is_nguyens_axial_model():
    z = np.full((400, 500), 1.2)
    z[:10] = 0  # no reading stays no reading
    noisy = scenegen.depth_noise(z, np.random.default_rng(0))
    assert (noisy[:10] == 0).all()
    sigma = 0.0012 + 0.0019 * 0.8 ** 2  # eq. 6 at 1.2 m
    assert abs((noisy[10:] - 1.2).std() / sigma - 1) < 0.02
    assert abs((noisy[10:] - 1.2).mean()) < 1e-4


def test_scene_ids_as_graspnet():
    assert scenegen.scene_ids(3, 2) == [0, 1, 2, 100, 101]
    with pytest.raises(ValueError, match='at most 100 and 90'):
        scenegen.scene_ids(101, 1)
    picks = [scenegen.scene_objects(5, 3, 0, s) for s in range(6)]
    assert all(len(set(p)) == 3 and max(p) < 5 for p in picks)
    assert picks == [scenegen.scene_objects(5, 3, 0, s) for s in range(6)]
    assert len({tuple(p) for p in picks}) > 1
