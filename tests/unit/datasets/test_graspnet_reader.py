"""The reader against files the synthetic writer made, and every bad input it must name."""
import os
import shutil

import numpy as np
import pytest
import scipy.io

from mmgrasp.datasets.graspnet_reader import DatasetFileError, GraspNetReader


@pytest.fixture
def dataset_copy(synthetic_root, tmp_path) -> str:
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    return root


def test_reads_the_writers_layout(synthetic_root):
    reader = GraspNetReader(synthetic_root)
    assert reader.scene_ids('train') == [0, 1]
    assert reader.num_frames(0) == 3
    meta = reader.load_meta(0, 1)
    listed = reader.scene_object_ids(0)
    np.testing.assert_array_equal(meta.object_ids, listed)  # meta is 1-based, files 0-based
    raw = scipy.io.loadmat(reader.frame_path(0, 'meta', 1))
    np.testing.assert_array_equal(meta.object_ids + 1, raw['cls_indexes'].reshape(-1))
    assert meta.poses.shape == (len(listed), 3, 4) and meta.poses.dtype == np.float32
    np.testing.assert_array_equal(meta.poses[2], raw['poses'][:, :, 2])
    depth = reader.load_depth(0, 1)
    seg = reader.load_segmentation(0, 1)
    assert depth.dtype == np.uint16 and depth.shape == seg.shape == (180, 320)
    assert set(np.unique(seg)) - {0} <= set((meta.object_ids + 1).tolist())
    label = reader.load_grasp_label(int(listed[0]))
    assert label['scores'].shape == label['widths'].shape == (len(label['points']), 5, 3, 3)
    assert label['self_collision'].dtype == bool
    masks = reader.load_collision(0, meta, {int(o): len(reader.load_grasp_label(int(o))['points'])
                                            for o in listed})
    assert len(masks) == len(listed)
    assert reader.load_tolerance(int(listed[0])).dtype == np.float32


def test_splits_and_ids():
    with pytest.raises(ValueError, match='scene id 200 out of range'):
        GraspNetReader.check_scene(200)
    with pytest.raises(ValueError, match='object id 88 out of range'):
        GraspNetReader.check_object(88)


def test_unknown_split_and_missing_scenes(synthetic_root):
    reader = GraspNetReader(synthetic_root)
    with pytest.raises(ValueError, match="split='val'"):
        reader.scene_ids('val')
    with pytest.raises(DatasetFileError, match='no scene of split .test_novel.'):
        reader.scene_ids('test_novel')


def test_not_a_root(tmp_path):
    with pytest.raises(DatasetFileError, match='not a GraspNet-1Billion root'):
        GraspNetReader(str(tmp_path))


def test_frame_out_of_range(synthetic_root):
    with pytest.raises(ValueError, match='frame 3 out of range: scene 0'):
        GraspNetReader(synthetic_root).load_depth(0, 3)


def test_missing_file_is_named(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    path = reader.frame_path(0, 'depth', 1)
    os.remove(path)
    with pytest.raises(DatasetFileError, match=f'{path}: file not found'):
        reader.load_depth(0, 1)
    os.remove(reader.grasp_label_path(5))
    with pytest.raises(DatasetFileError, match='005_labels.npz: file not found'):
        reader.load_grasp_label(5)


def test_truncated_npz(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    path = reader.grasp_label_path(4)
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        f.truncate(size // 2)
    with pytest.raises(DatasetFileError, match='004_labels.npz: (cannot open npz|array .* is '
                                               'truncated or corrupt)'):
        reader.load_grasp_label(4)


def test_corrupt_npz(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    path = reader.collision_label_path(1)
    with open(path, 'wb') as f:
        f.write(b'this is not a zip archive' * 10)
    with pytest.raises(DatasetFileError, match='collision_labels.npz: cannot open npz'):
        reader.load_collision(1)


def _rewrite_label(reader, obj, **changes):
    with np.load(reader.grasp_label_path(obj)) as npz:
        arrays = dict(npz)
    arrays.update(changes)
    np.savez(reader.grasp_label_path(obj), **arrays)
    return arrays


def test_wrong_shape_and_dtype(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    arrays = _rewrite_label(reader, 4)
    _rewrite_label(reader, 4, scores=arrays['scores'][:-1])
    with pytest.raises(DatasetFileError, match=r"004_labels.npz: 'scores' has shape \(\d+, 5, 3, "
                                               r'3\), expected'):
        reader.load_grasp_label(4)
    _rewrite_label(reader, 4, scores=arrays['scores'], points=arrays['points'][:, :2])
    with pytest.raises(DatasetFileError, match="'points' has shape .*expected"):
        reader.load_grasp_label(4)
    _rewrite_label(reader, 4, points=arrays['points'], collision=arrays['collision'].astype(np.int8))
    with pytest.raises(DatasetFileError, match="'collision' has dtype int8"):
        reader.load_grasp_label(4)
    _rewrite_label(reader, 4, collision=arrays['collision'],
                   offsets=arrays['offsets'][..., :2])
    with pytest.raises(DatasetFileError, match="'offsets' has shape"):
        reader.load_grasp_label(4)


def test_meta_disagrees_with_collision_file(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    meta = reader.load_meta(1, 0)
    points = {int(o): len(reader.load_grasp_label(int(o))['points']) for o in meta.object_ids}
    with np.load(reader.collision_label_path(1)) as npz:
        arrays = [npz[f'arr_{i}'] for i in range(len(npz.files))]
    np.savez(reader.collision_label_path(1), *arrays[:-1])
    with pytest.raises(DatasetFileError, match='has 3 arrays but meta cls_indexes of scene 1 list 4'):
        reader.load_collision(1, meta, points)
    np.savez(reader.collision_label_path(1), *arrays[::-1])
    assert any(len(a) != len(b) for a, b in zip(arrays, arrays[::-1]))
    with pytest.raises(DatasetFileError, match='cls_indexes disagree with the collision file'):
        reader.load_collision(1, meta, points)


def test_meta_with_bad_ids(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    path = reader.frame_path(0, 'meta', 0)
    mat = scipy.io.loadmat(path)
    mat['cls_indexes'] = mat['cls_indexes'] - 1  # 0-based by mistake: contains 0
    scipy.io.savemat(path, {k: v for k, v in mat.items() if not k.startswith('__')})
    assert (mat['cls_indexes'] < 1).any()  # scene 0 holds object 0
    with pytest.raises(DatasetFileError, match="'cls_indexes' must be 1-based"):
        reader.load_meta(0, 0)
    mat['poses'] = mat['poses'][:, :, :-1]
    mat['cls_indexes'] = mat['cls_indexes'] + 1
    scipy.io.savemat(path, {k: v for k, v in mat.items() if not k.startswith('__')})
    with pytest.raises(DatasetFileError, match="'poses' has shape"):
        reader.load_meta(0, 0)


def _rewrite_meta_objects(path, order):
    """Rewrite a meta file's cls_indexes and poses as ``order`` (positions of the original list,
    -1 adds an object the scene does not hold, with the first object's pose)."""
    mat = scipy.io.loadmat(path)
    cls, poses = mat['cls_indexes'].reshape(-1), mat['poses']
    absent = next(i for i in range(1, 89) if i not in cls)
    mat['cls_indexes'] = np.array([[cls[i] if i >= 0 else absent for i in order]], np.int64)
    mat['poses'] = np.stack([poses[:, :, max(i, 0)] for i in order], axis=2)
    scipy.io.savemat(path, {k: v for k, v in mat.items() if not k.startswith('__')})


@pytest.mark.parametrize('change', ['one_more', 'one_fewer', 'swapped'])
@pytest.mark.parametrize('source', ['files', 'frames'])
def test_every_frame_objects_are_checked_against_the_scene(dataset_copy, tmp_path, change,
                                                           source):
    """A later frame (not 0000) whose meta lists the scene's objects differently is refused
    with the meta file named, on both cloud sources and both grid storages."""
    from mmgrasp.datasets import GraspNetDataset
    reader = GraspNetReader(dataset_copy)
    ids = reader.scene_object_ids(1).tolist()
    assert len(set(ids)) == len(ids) == 4  # scene 1 holds 4 distinct objects
    order = dict(one_more=[0, 1, 2, 3, -1], one_fewer=[1, 2, 3], swapped=[1, 0, 2, 3])[change]
    path = reader.frame_path(1, 'meta', 2)
    _rewrite_meta_objects(path, order)
    for grids in ('dense', 'deferred'):
        dataset = GraspNetDataset(dataset_copy, seed=0, pipeline=[
            dict(type='LoadGraspScene', num_points=500, source=source,
                 cache_dir=str(tmp_path / 'cache')),
            dict(type='SampleGraspLabels', grids=grids, min_points=10, min_object_points=20,
                 cache_dir=str(tmp_path / 'cache')),
            dict(type='PackGraspInputs')])
        dataset[4]  # scene 1 frame 1, unchanged, still loads
        with pytest.raises(DatasetFileError, match=f'{path}: .*object_id_list.txt'):
            dataset[5]  # scene 1 frame 2


def test_label_transform_checks_objects_against_the_store(synthetic_root, tmp_path):
    """SampleGraspLabels reads collision rows by position too: a frame's object list that is not
    the store's scene list is refused, naming the meta file."""
    from mmgrasp.datasets.transforms.grasp_labels import SampleGraspLabels
    reader = GraspNetReader(synthetic_root)
    transform = SampleGraspLabels(grids='deferred', cache_dir=str(tmp_path))
    store = transform.prepare(synthetic_root)
    ids = np.array(store.scenes[1].object_ids)
    results = dict(object_ids=ids[[1, 0, 2, 3]], reader=reader, scene=1, frame=2)
    with pytest.raises(DatasetFileError, match=f'{reader.frame_path(1, "meta", 2)}: .*label store'):
        transform._check_objects(store, 1, results)
    transform._check_objects(store, 1, dict(results, object_ids=ids))


def test_object_poses_and_model_points(synthetic_root):
    """The annotation XML's float32 poses (graspnetAPI's, through Euler angles), the frame's
    camera pose and the objects of the collision arrays; model vertices as open3d reads them."""
    from mmgrasp.datasets.model_files import read_annotation, read_ply_points
    reader = GraspNetReader(synthetic_root)
    posed = reader.load_object_poses(1, 2)
    objects = read_annotation(reader.annotation_path(1, 2))
    np.testing.assert_array_equal(posed.object_ids, reader.load_meta(1, 2).object_ids)
    np.testing.assert_array_equal(posed.poses, np.stack([pose for _, pose in objects]))
    assert posed.poses.dtype == np.float32
    np.testing.assert_array_equal(posed.camera_pose, reader.trajectory(1).camera_poses[2])
    # the XML pose is the meta pose to float32 rounding of its Euler angles
    np.testing.assert_allclose(posed.poses[:, :3], reader.load_meta(1, 2).poses, atol=1e-6)
    points = reader.load_model_points(int(posed.object_ids[0]))
    assert points.dtype == np.float64 and points.shape[1] == 3 and len(points) > 100
    np.testing.assert_array_equal(points, read_ply_points(
        os.path.join(synthetic_root, 'models', f'{posed.object_ids[0]:03d}', 'nontextured.ply')))


def test_bad_annotation_and_model_are_named(dataset_copy):
    reader = GraspNetReader(dataset_copy)
    xml = reader.annotation_path(0, 1)
    os.chmod(xml, 0o644)
    with open(xml, 'w') as f:
        f.write('<scene><obj><id>x</id></obj></scene>')
    with pytest.raises(DatasetFileError, match=rf'{xml}: not a GraspNet annotation'):
        reader.load_object_poses(0, 1)
    ply = reader.model_points_path(0)
    os.chmod(ply, 0o644)
    with open(ply, 'w') as f:
        f.write('ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nend_header\n1 2\n')
    with pytest.raises(DatasetFileError, match=rf'{ply}: .*lack x, y or z'):
        reader.load_model_points(0)
    with pytest.raises(ValueError, match='frame 9 out of range'):
        reader.load_object_poses(0, 9)
