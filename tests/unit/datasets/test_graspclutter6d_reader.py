"""GraspClutter6DReader: cameras, image ids, poses, instances, visibility and the label PNG as
graspclutter6dAPI reads them, and an error naming the file for every inconsistency."""
import json
import os
import re
import shutil

import cv2
import numpy as np
import pytest

from mmgrasp.datasets.graspclutter6d_reader import (DEPTH_SCALE, GraspClutter6DReader,
                                                    camera_name, image_id)
from mmgrasp.datasets.layouts import detect_layout, open_reader
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.storage.source import DatasetFileError


@pytest.fixture
def copy(gc6d_root, tmp_path):
    root = str(tmp_path / 'gc6d')
    shutil.copytree(gc6d_root, root)
    return root


def _edit_json(path, edit):
    with open(path) as f:
        payload = json.load(f)
    edit(payload)
    with open(path, 'w') as f:
        json.dump(payload, f)


def test_cameras_and_image_ids():
    assert camera_name('realsense') == 'realsense-d435'
    assert camera_name('kinect') == 'azure-kinect'
    assert [image_id(3, c) for c in ('realsense-d415', 'realsense', 'kinect', 'zivid')] == \
        [13, 14, 15, 16]
    with pytest.raises(ValueError, match='camera'):
        camera_name('d435')


def test_layout_is_detected(gc6d_root, synthetic_root):
    assert detect_layout(gc6d_root) == 'graspclutter6d'
    assert detect_layout(synthetic_root) == 'graspnet'
    assert open_reader(gc6d_root, 'kinect').camera == 'azure-kinect'
    with pytest.raises(DatasetFileError, match="layout='graspnet'"):
        open_reader(gc6d_root, layout='graspnet')


def test_frames_poses_and_instances_follow_the_json_files(gc6d_root):
    for camera in DEPTH_SCALE:
        reader = GraspClutter6DReader(gc6d_root, camera)
        assert reader.scene_ids('train') == [1, 2] and reader.scene_ids('test') == [3]
        assert reader.scene_ids('all') == [1, 2, 3] and reader.num_frames(1) == 3
        with open(os.path.join(gc6d_root, 'scenes', '000001', 'scene_gt.json')) as f:
            gt = json.load(f)[str(reader.image_id(2))]
        with open(os.path.join(gc6d_root, 'scenes', '000001', 'scene_camera.json')) as f:
            cam = json.load(f)[str(reader.image_id(2))]
        meta = reader.load_meta(1, 2)
        ids = [i['obj_id'] for i in gt]
        assert meta.object_ids.tolist() == [i - 1 for i in ids]
        assert len(set(ids)) < len(ids)  # a duplicate, kept in scene_gt order
        np.testing.assert_array_equal(meta.poses[:, :, :3], np.array(
            [i['cam_R_m2c'] for i in gt], np.float32).reshape(-1, 3, 3))
        metres = (np.array([i['cam_t_m2c'] for i in gt]) / 1000.0).astype(np.float32)
        np.testing.assert_array_equal(meta.poses[:, :, 3], metres)
        np.testing.assert_array_equal(meta.intrinsics, np.reshape(cam['cam_K'], (3, 3)))
        assert meta.factor_depth == DEPTH_SCALE[camera]
        w2c = np.eye(4)
        w2c[:3, :3], w2c[:3, 3] = np.reshape(cam['cam_R_w2c'], (3, 3)), \
            np.array(cam['cam_t_w2c']) / 1000.0
        np.testing.assert_allclose(reader.trajectory(1).camera_to_table(2) @ w2c, np.eye(4),
                                   atol=1e-12)
        # the depth scale is the camera's: box points back-project to the same metres
        depth, seg = reader.load_depth(1, 2), reader.load_segmentation(1, 2)
        label = cv2.imread(reader.frame_path(1, 'label', 2), cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(seg, label[:, :, 0])
        assert set(np.unique(seg)) - {0} <= set(ids)
        z = depth[seg > 0] / meta.factor_depth
        assert 0.3 < np.median(z) < 1.5


def test_visibility_is_the_mask_ratio_of_loadgrasp(copy):
    reader = GraspClutter6DReader(copy)
    np.testing.assert_array_equal(reader.visibility(1, 0), 1.0)  # no occlusion in scene 1
    visible = cv2.imread(reader.mask_path(1, 0, 1, True), cv2.IMREAD_UNCHANGED)
    rows = np.flatnonzero(visible.any(axis=1))
    part = visible.copy()
    part[rows[: len(rows) // 2]] = 0  # half of instance 1 hidden
    cv2.imwrite(reader.mask_path(1, 0, 1, True), part)
    cv2.imwrite(reader.mask_path(1, 0, 2, True), np.zeros_like(visible))  # instance 2 hidden
    for visible_mask in (True, False):  # instance 3: 0 / 0
        cv2.imwrite(reader.mask_path(1, 0, 3, visible_mask), np.zeros_like(visible))
    vis = GraspClutter6DReader(copy).visibility(1, 0)
    assert vis[0] == 1.0 and vis[1] == np.sum(part, dtype=np.float64) / np.sum(visible,
                                                                                dtype=np.float64)
    assert vis[2] == 0.0 and np.isnan(vis[3])
    assert GraspClutter6DReader(copy).visible_instances(1, 0).tolist() == [0, 1]


def test_instance_without_collision_rows(copy):
    path = os.path.join(copy, 'collision_label', '000001.npz')
    with np.load(path) as npz:
        masks = [npz[f'arr_{i}'] for i in range(len(npz.files) - 1)]
    np.savez(path, *masks)
    reader = GraspClutter6DReader(copy)
    with pytest.raises(DatasetFileError, match=r'000001\.npz.*every instance needs its collision'):
        reader.check_frame_objects(1, reader.load_meta(1, 0).object_ids,
                                   reader.frame_path(1, 'meta', 0))
    with pytest.raises(DatasetFileError, match=r'000001\.npz: has 3 arrays'):
        open_label_store(reader, os.path.join(copy, '..', 'cache'))


def test_obj_id_without_labels(copy):
    reader = GraspClutter6DReader(copy)
    obj = int(reader.load_meta(1, 0).object_ids[0])
    os.remove(reader.grasp_label_path(obj))
    with pytest.raises(DatasetFileError, match=rf'obj_{obj + 1:06d}_labels\.npz: file not found: '
                                               rf'object {obj + 1} \(obj_id\)'):
        open_label_store(reader, os.path.join(copy, '..', 'cache'))


def test_missing_camera(copy):
    path = os.path.join(copy, 'scenes', '000002', 'scene_camera.json')
    _edit_json(path, lambda cam: [cam.pop(str(image_id(a, 'zivid'))) for a in range(3)])
    reader = GraspClutter6DReader(copy, 'zivid')
    with pytest.raises(DatasetFileError, match=r'000002/scene_camera\.json: no image of camera '
                                               r'zivid'):
        reader.num_frames(2)
    assert GraspClutter6DReader(copy, 'kinect').num_frames(2) == 3


def test_instances_differ_between_frames(copy):
    path = os.path.join(copy, 'scenes', '000001', 'scene_gt.json')
    _edit_json(path, lambda gt: gt[str(image_id(1, 'realsense'))].reverse())
    reader = GraspClutter6DReader(copy)
    with pytest.raises(DatasetFileError, match=r'scene_gt\.json: a frame of camera '
                                               r'realsense-d435 lists objects'):
        reader.check_frame_objects(1, reader.load_meta(1, 1).object_ids,
                                   reader.frame_path(1, 'meta', 1))


def test_bad_obj_id_and_pose(copy):
    path = os.path.join(copy, 'scenes', '000001', 'scene_gt.json')
    _edit_json(path, lambda gt: gt[str(image_id(0, 'realsense'))][1].update(obj_id=201))
    with pytest.raises(DatasetFileError, match=r'scene_gt\.json: image 2 instance 1: obj_id 201'):
        GraspClutter6DReader(copy).load_meta(1, 0)
    _edit_json(path, lambda gt: gt[str(image_id(0, 'realsense'))][1].update(
        obj_id=1, cam_R_m2c=[1, 0, 0]))
    with pytest.raises(DatasetFileError, match=r'scene_gt\.json: image 2 instance 1: needs'):
        GraspClutter6DReader(copy).load_meta(1, 0)


def test_single_channel_label_png(copy):
    reader = GraspClutter6DReader(copy)
    path = reader.frame_path(1, 'label', 0)
    cv2.imwrite(path, cv2.imread(path, cv2.IMREAD_UNCHANGED)[:, :, 0])
    with pytest.raises(DatasetFileError, match=r'000002\.png: expected a 3-channel image'):
        reader.load_segmentation(1, 0)


def test_missing_split_file(copy):
    os.remove(os.path.join(copy, 'split_info', 'grasp_test_scene_ids.json'))
    with pytest.raises(DatasetFileError, match=r'grasp_test_scene_ids\.json: file not found'):
        GraspClutter6DReader(copy).scene_ids('test')


def test_collision_rows_must_match_label_points(copy):
    path = os.path.join(copy, 'collision_label', '000002.npz')
    with np.load(path) as npz:
        masks = [npz[f'arr_{i}'] for i in range(len(npz.files))]
    masks[0] = masks[0][:-1]
    np.savez(path, *masks)
    with pytest.raises(DatasetFileError, match=r"000002\.npz: 'arr_0' has \d+ rows but instance 0"):
        open_label_store(GraspClutter6DReader(copy), os.path.join(copy, '..', 'cache'))


def _reader_without_image(gc6d_root, tmp_path, annotation, everywhere=False):
    """A copy of test scene 3 whose scene_camera.json lacks the d435's ``annotation``; with
    ``everywhere``, scene_gt.json and the image's depth, label and RGB PNGs lack it too."""
    root = str(tmp_path / 'gc6d')
    shutil.copytree(os.path.join(gc6d_root, 'scenes', '000003'),
                    os.path.join(root, 'scenes', '000003'))
    reader = GraspClutter6DReader(root, 'realsense-d435')
    path = reader.scene_camera_path(3)
    key = str(reader.image_id(annotation))
    _edit_json(path, lambda entries: entries.pop(key))
    if everywhere:
        _edit_json(reader.frame_path(3, 'meta', 0), lambda gt: gt.pop(key))
        for kind in ('depth', 'label', 'rgb'):
            os.remove(reader.frame_path(3, kind, annotation))
    return reader, path


def test_a_missing_image_inside_the_annotations_names_file_and_image(gc6d_root, tmp_path):
    """scene_camera.json without annotation 1's image (annotation 2's is there): an error
    naming the file and image id, not a scene that silently has one frame."""
    reader, path = _reader_without_image(gc6d_root, tmp_path, 1)
    image = reader.image_id(1)
    with pytest.raises(DatasetFileError, match=rf"{re.escape(path)}.*no entry for image {image} "
                                               rf"\(camera realsense-d435, annotation 1\) while "
                                               rf"annotation 2's image {reader.image_id(2)}"):
        reader.num_frames(3)


def test_the_last_image_missing_from_one_file_names_it(gc6d_root, tmp_path):
    """The last annotation gone from scene_camera.json alone: scene_gt.json and the PNGs still
    hold the frame, so the scene is not shorter, it is inconsistent (the frame used to drop
    out silently)."""
    reader, path = _reader_without_image(gc6d_root, tmp_path, 2)
    image = reader.image_id(2)
    with pytest.raises(DatasetFileError, match=rf"{re.escape(path)}: no entry for image {image} "
                                               rf"\(camera realsense-d435, annotation 2\) while "
                                               rf".*scene_gt\.json holds it"):
        reader.num_frames(3)


@pytest.mark.parametrize('kind', ['meta', 'depth', 'label', 'rgb'])
def test_an_image_missing_from_one_per_image_file_names_file_and_image(gc6d_root, tmp_path,
                                                                      kind):
    """The same check the other way: a frame scene_camera.json lists but one of scene_gt.json
    and the depth, label and RGB PNGs lacks is named with that file and the image."""
    root = str(tmp_path / 'gc6d')
    shutil.copytree(os.path.join(gc6d_root, 'scenes', '000003'),
                    os.path.join(root, 'scenes', '000003'))
    reader = GraspClutter6DReader(root, 'realsense-d435')
    path = reader.frame_path(3, kind, 2)
    if kind == 'meta':
        _edit_json(path, lambda gt: gt.pop(str(reader.image_id(2))))
    else:
        os.remove(path)
    with pytest.raises(DatasetFileError, match=rf"{re.escape(path)}: no (entry|file) for image "
                                               rf"{reader.image_id(2)} \(camera realsense-d435, "
                                               rf"annotation 2\) while .*scene_camera\.json "
                                               rf"lists it"):
        reader.num_frames(3)


def test_a_frame_past_the_last_image_names_file_and_images(gc6d_root, tmp_path):
    # a shorter scene: allowed when every per-image file ends there
    reader, path = _reader_without_image(gc6d_root, tmp_path, 2, everywhere=True)
    assert reader.num_frames(3) == 2
    with pytest.raises(ValueError, match=rf'frame 2 out of range: scene 3 \(realsense-d435\) has '
                                         rf'2 annotations in {re.escape(path)} \(image ids '
                                         rf'{reader.image_id(0)}, {reader.image_id(1)}; frame 2 '
                                         rf'is image {reader.image_id(2)}\)'):
        reader._check_frame(3, 2)


def test_object_poses_and_model_points(gc6d_root):
    """scene_gt.json's float64 poses as they are (no camera composition) and models_m/."""
    reader = GraspClutter6DReader(gc6d_root, 'zivid')
    posed = reader.load_object_poses(1, 2)
    ids, poses = reader.instances(1, 2)
    np.testing.assert_array_equal(posed.object_ids, ids)
    np.testing.assert_array_equal(posed.poses, poses)
    assert posed.poses.dtype == np.float64 and posed.camera_pose is None
    points = reader.load_model_points(int(ids[0]))
    assert reader.model_points_path(int(ids[0])).endswith(f'models_m/obj_{ids[0] + 1:06d}.ply')
    assert points.dtype == np.float64 and points.shape[1] == 3 and len(points) > 100
