"""Scenes of generated objects: the writer ray-casts textured.sdf like the synthetic writer
ray-casts the exact shapes, the scene collision labels are the evaluator's point test in the
camera frame plus the table, the label store refuses labels of another gripper, and the
config check refuses two grippers."""
import os

import numpy as np
import pytest
from mmengine.config import Config

from mmgrasp.apis.config_check import check_grippers
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.labelgen import TriangleMesh, model_points, write_model_files
from mmgrasp.datasets.labelgen.object_labels import label_grasps
from mmgrasp.datasets.labelgen.objects import save_labels
from mmgrasp.datasets.labelgen.scenes import scene_collision_labels, write_scene
from mmgrasp.datasets.labelgen import object_grasp_labels
from mmgrasp.datasets.synthetic.scene import (camera_intrinsics, look_at, make_model,
                                              model_mesh, render, rigid_transform)
from mmgrasp.geometry import build_gripper, gripper_collision, read_dexnet_sdf, transform_points
from mmgrasp.storage.labels.store import open_label_store

GRIPPER = build_gripper(dict(num_views=12, num_angles=6, num_depths=2))
KINDS = ('box', 'lshape', 'box')


@pytest.fixture(scope='module')
def scene_root(tmp_path_factory):
    """Three objects (two boxes, an L) on the table, two frames, labels on a small grid."""
    root = str(tmp_path_factory.mktemp('scene') / 'mine')
    models = []
    for obj, kind in enumerate(KINDS):
        model = make_model(1, obj, 12, kind)
        model_dir = os.path.join(root, 'models', f'{obj:03d}')
        write_model_files(TriangleMesh(*model_mesh(model)), model_dir, 0.003, 'numpy')
        labels = object_grasp_labels(read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf')),
                                     model.points, model_points(model_dir), GRIPPER)
        os.makedirs(os.path.join(root, 'grasp_label'), exist_ok=True)
        save_labels(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz'), labels)
        models.append(model)
    with open(os.path.join(root, 'grasp_label', 'gripper.json'), 'w') as f:
        f.write(GRIPPER.to_json())
    # touching neighbours, so some grasps hit another object; resting on the table
    poses = [rigid_transform(np.eye(3), (x, 0.0, m.half[2])) for x, m in
             zip((-0.07, 0.0, 0.06), models)]
    cameras = [look_at(np.array([0.3 * np.cos(a), 0.3 * np.sin(a), 0.45]),
                       np.array([0.0, 0.0, 0.02])) for a in (0.3, 0.6)]
    K = camera_intrinsics('realsense', (320, 180))
    write_scene(root, 0, [0, 1, 2], poses, cameras, K, (320, 180))
    return dict(root=root, models=models, poses=poses, cameras=cameras, K=K)


def test_written_scene_reads_back_and_matches_the_exact_rendering(scene_root):
    reader = GraspNetReader(scene_root['root'])
    meta = reader.load_meta(0, 1)
    assert meta.object_ids.tolist() == [0, 1, 2] and meta.factor_depth == 1000
    to_table = reader.trajectory(0).camera_to_table(1)
    np.testing.assert_allclose(to_table, scene_root['cameras'][1], atol=1e-9)
    for pose, expected in zip(meta.poses, scene_root['poses']):
        np.testing.assert_allclose(to_table[:3, :3] @ pose[:, :3], expected[:3, :3], atol=1e-6)
    depth = reader.load_depth(0, 1) / 1000.0
    seg = reader.load_segmentation(0, 1)
    shapes = [m.shape for m in scene_root['models']]
    z, exact_seg, _ = render(scene_root['K'], (320, 180), scene_root['cameras'][1],
                             scene_root['poses'], [m.half for m in scene_root['models']],
                             [1, 2, 3], shapes)
    both = (seg > 0) & (exact_seg > 0)
    assert both.sum() > 200 and (seg[both] == exact_seg[both]).mean() > 0.98
    error = np.abs(depth - z)[both & (seg == exact_seg)]  # the 3 mm SDF grid against exact
    assert np.median(error) < 0.001 and np.quantile(error, 0.98) < 0.003  # (silhouettes)


def test_scene_collision_is_the_evaluators_test_in_the_camera_frame(scene_root):
    root = scene_root['root']
    arrays = scene_collision_labels(root, 0, GRIPPER)
    reader = GraspNetReader(root)
    meta = reader.load_meta(0, 0)
    rot = label_grasps(np.zeros((0, 3)), GRIPPER)[0]
    posed = [transform_points(model_points(os.path.join(root, 'models', f'{i:03d}')),
                              np.vstack([p, [0, 0, 0, 1]]))
             for i, p in zip(meta.object_ids, meta.poses)]
    to_table = reader.trajectory(0).camera_to_table(0)
    extra = 0
    for n, (obj, pose) in enumerate(zip(meta.object_ids, meta.poses)):
        label = reader.load_grasp_label(int(obj))
        own = label['self_collision']
        assert (arrays[n] >= own).all()
        cells = np.argwhere((label['scores'] > 0) & ~own)
        pi, vi, ai, di = cells.T
        rows = np.zeros((len(cells), 17))
        rows[:, 1], rows[:, 2], rows[:, 3] = label['widths'][pi, vi, ai, di], 0.02, \
            GRIPPER.depths()[di]
        r = pose[:, :3].astype(np.float64) @ rot[vi, ai]  # the grasp in the camera frame
        rows[:, 4:13] = r.reshape(-1, 9)
        rows[:, 13:16] = label['points'][pi] @ pose[:, :3].T.astype(np.float64) + pose[:, 3]
        others = np.concatenate([p for k, p in enumerate(posed) if k != n])
        hit, _ = gripper_collision(rows, others, empty_thresh=0)
        # the table: the gripper hull's lowest corner below z = 0 of the table frame
        corner = np.array([[x, y, z] for x in (-0.03, 1) for y in (-1, 1) for z in (-1, 1)])
        half = rows[:, 1] / 2 + GRIPPER.finger_width
        pts = corner[None] * np.stack([np.ones(len(rows)), half, np.full(len(rows), 0.01)], 1)[
            :, None]
        pts[:, :, 0] = np.where(corner[None, :, 0] > 0, rows[:, 3:4], -0.03)
        world = np.einsum('kij,kcj->kci', r, pts) + rows[:, None, 13:16]
        world = world @ to_table[:3, :3].T + to_table[:3, 3]
        below = world[..., 2].min(1) < 0
        np.testing.assert_array_equal(arrays[n][pi, vi, ai, di], hit | below)
        extra += int((hit | below).sum())
    assert extra > 0


def test_label_store_refuses_another_gripper(scene_root, tmp_path):
    from mmgrasp.datasets.labelgen.scenes import write_collision_labels
    root = scene_root['root']
    if not os.path.isfile(os.path.join(root, 'collision_label', 'scene_0000',
                                       'collision_labels.npz')):
        write_collision_labels(root, 0, GRIPPER)
    store = open_label_store(GraspNetReader(root), str(tmp_path / 'cache'))
    assert store.manifest['gripper'] == GRIPPER.to_dict()
    store.check_gripper(GRIPPER.to_dict(), 'SampleGraspLabels.gripper')
    with pytest.raises(ValueError) as err:
        store.check_gripper(None, 'SampleGraspLabels.gripper')
    assert 'SampleGraspLabels.gripper' in str(err.value) and 'gripper.json' in str(err.value)
    assert 'grid 300x12x4' in str(err.value) and 'grid 12x6x2' in str(err.value)


def test_config_mixing_grippers_is_refused(tmp_path):
    from mmgrasp.apis import register_all_modules
    register_all_modules()
    base = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'configs', 'gsnet_demo.py')
    narrow = "gripper = dict(max_width=0.08, finger_width=0.015)\n"
    one = tmp_path / 'one.py'
    one.write_text(f"_base_ = ['{os.path.abspath(base)}']\n{narrow}"
                   "model = dict(gripper=gripper)\ntest_evaluator = dict(gripper=gripper)\n"
                   "train_dataloader = dict(dataset=dict(pipeline=[\n"
                   "    dict(type='LoadGraspScene', num_points=4000, with_graspness=True),\n"
                   "    dict(type='SampleGraspLabels', gripper=gripper),\n"
                   "    dict(type='PackGraspInputs', keys=('points', 'objectness', "
                   "'graspness'))]))\n")
    check_grippers(Config.fromfile(str(one)), 'one.py')  # one gripper everywhere
    check_grippers(Config.fromfile(base), 'gsnet_demo.py')  # GraspNet's, never written
    two = tmp_path / 'two.py'
    two.write_text(f"_base_ = ['{os.path.abspath(base)}']\n{narrow}"
                   "model = dict(gripper=gripper)\n")
    with pytest.raises(SystemExit) as err:
        check_grippers(Config.fromfile(str(two)), 'two.py')
    message = str(err.value)
    assert 'two grippers' in message and 'model.gripper' in message
    assert 'max_width=0.08' in message and 'max_width=0.1' in message
