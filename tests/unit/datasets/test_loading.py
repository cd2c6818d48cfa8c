"""LoadGraspScene, RandomFlipRotateScene, PackGraspInputs and GraspDataSample."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspnet_reader import (CameraTrajectory, DatasetFileError, FrameMeta,
                                               GraspNetReader)
from mmgrasp.datasets.transforms.augmentation import RandomFlipRotateScene
from mmgrasp.datasets.transforms.formatting import OneBuffer, PackGraspInputs
from mmgrasp.datasets.transforms.loading import LoadGraspScene, depth_to_cloud, workspace_mask
from mmgrasp.registry import TRANSFORMS
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.structures.grasp_labels import ObjectGraspLabels
from mmgrasp.utils.random import sample_rng


def reference_masked_cloud(reader, scene, frame, outlier=0.02):
    """graspnet-baseline's loader, transcribed: cloud, homogeneous transform, box, mask."""
    depth = reader.load_depth(scene, frame)
    seg = reader.load_segmentation(scene, frame)
    meta = reader.load_meta(scene, frame)
    k, scale = meta.intrinsics, meta.factor_depth
    xmap, ymap = np.meshgrid(np.arange(depth.shape[1]), np.arange(depth.shape[0]))
    z = depth / scale
    cloud = np.stack([(xmap - k[0, 2]) * z / k[0, 0], (ymap - k[1, 2]) * z / k[1, 1], z], -1)
    flat = cloud.reshape(-1, 3)
    trans = reader.trajectory(scene).camera_to_table(frame)
    table = np.dot(trans, np.concatenate([flat, np.ones((len(flat), 1))], 1).T).T[:, :3]
    fg = table[seg.reshape(-1) > 0]
    lo, hi = fg.min(0) - outlier, fg.max(0) + outlier
    ws = np.all((table > lo) & (table < hi), axis=1)
    mask = (depth.reshape(-1) > 0) & ws
    return flat[mask], seg.reshape(-1)[mask]


class FakeReader:
    """A 3 x 4 frame with hand-set depth, segmentation, intrinsics and table transform."""
    camera = 'realsense'

    def __init__(self, graspness=None, tmpdir=None):
        self.depth = np.array([[1000, 1000, 0, 1000],
                               [1000, 2000, 1000, 1000],
                               [1000, 1000, 1000, 9000]], np.uint16)
        self.seg = np.array([[0, 1, 0, 0],
                             [0, 2, 2, 0],
                             [0, 0, 0, 0]], np.uint8)
        k = np.array([[100.0, 0, 1.5], [0, 100.0, 1.0], [0, 0, 1]])
        self.meta = FrameMeta(poses=np.tile(np.eye(4, dtype=np.float32)[:3], (2, 1, 1)),
                              object_ids=np.array([0, 1]), intrinsics=k, factor_depth=1000.0)
        self.graspness = graspness
        self.tmpdir = tmpdir

    def load_depth(self, scene, frame):
        return self.depth

    def load_segmentation(self, scene, frame):
        return self.seg

    def load_meta(self, scene, frame):
        return self.meta

    def trajectory(self, scene):
        return CameraTrajectory(self.meta.intrinsics, np.eye(4)[None], np.eye(4))

    def load_graspness(self, scene, frame):
        return self.graspness

    def graspness_path(self, scene, frame):
        return os.path.join(str(self.tmpdir), 'graspness.npy')

    def frame_path(self, scene, kind, frame):
        return os.path.join(str(self.tmpdir), f'{kind}.mat')

    def check_frame_objects(self, scene, object_ids, meta_path):
        assert list(object_ids) == [0, 1], meta_path  # the fake scene holds objects 0 and 1


def fake_results(reader, seed=0, epoch=0, index=0):
    return dict(reader=reader, scene=0, frame=0, rng=sample_rng(seed, epoch, index))


def test_registered():
    for name in ('LoadGraspScene', 'RandomFlipRotateScene', 'PackGraspInputs'):
        assert TRANSFORMS.get(name) is not None


def test_depth_to_cloud_formula():
    depth = np.array([[0, 500], [1000, 2500]], np.uint16)
    k = np.array([[200.0, 0, 0.5], [0, 100.0, 0.25], [0, 0, 1]])
    cloud = depth_to_cloud(depth, k, 1000.0)
    assert cloud.shape == (2, 2, 3) and cloud.dtype == np.float64
    # pixel (row v=1, column u=1), depth 2.5 m
    np.testing.assert_allclose(cloud[1, 1], [(1 - 0.5) * 2.5 / 200, (1 - 0.25) * 2.5 / 100, 2.5])
    np.testing.assert_allclose(cloud[0, 1], [0.5 * 0.5 / 200, -0.25 * 0.5 / 100, 0.5])
    np.testing.assert_array_equal(cloud[0, 0], 0)


def test_workspace_mask_hand_example():
    # one row of 6 points; foreground x spans [0, 1] in the table frame, y = z = 0
    x = np.array([0.0, 1.0, 1.01, 1.03, -0.019, -0.021])
    cloud_table = np.stack([x, np.zeros(6), np.zeros(6)], -1)[None]
    seg = np.array([[1, 2, 0, 0, 0, 0]])
    np.testing.assert_array_equal(workspace_mask(cloud_table, seg, np.eye(4), 0.02)[0],
                                  [1, 1, 1, 0, 1, 0])
    # the same table-frame points seen from a camera rotated 90 deg about z and shifted:
    # camera_to_table maps them back, so the mask must not change
    rot = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    trans = np.eye(4)
    trans[:3, :3], trans[:3, 3] = rot, [0.3, -0.2, 0.5]
    cloud_camera = (cloud_table[0] - trans[:3, 3]) @ rot  # inverse transform, row vectors
    np.testing.assert_array_equal(workspace_mask(cloud_camera[None], seg, trans, 0.02)[0],
                                  [1, 1, 1, 0, 1, 0])
    # the margin is strict: a point exactly at max + outlier is outside
    edge = np.array([[[0.0, 0, 0], [1.0, 0, 0], [1.02, 0, 0]]])
    np.testing.assert_array_equal(workspace_mask(edge, np.array([[1, 1, 0]]), np.eye(4), 0.02)[0],
                                  [1, 1, 0])
    with pytest.raises(ValueError, match='no foreground'):
        workspace_mask(edge, np.zeros((1, 3)), np.eye(4), 0.02)


def test_load_fake_frame_without_replacement():
    reader = FakeReader()
    out = LoadGraspScene(source='files', num_points=5)(fake_results(reader))
    # depth > 0 drops (0, 2); the workspace box of the foreground (z in [1, 2]) drops z = 9
    cloud = depth_to_cloud(reader.depth, reader.meta.intrinsics, 1000.0)
    keep = reader.depth > 0
    keep[2, 3] = False
    assert out['num_masked'] == keep.sum() == 10
    idx = out['point_index']
    assert idx.dtype == np.int64 and len(np.unique(idx)) == 5 and idx.max() < 10
    np.testing.assert_array_equal(out['points'], cloud[keep][idx].astype(np.float32))
    np.testing.assert_array_equal(out['seg'], reader.seg[keep][idx])
    np.testing.assert_array_equal(out['objectness'], reader.seg[keep][idx] > 0)
    assert out['points'].dtype == np.float32 and out['seg'].dtype == np.int64
    assert out['objectness'].dtype == np.int64
    np.testing.assert_array_equal(out['object_ids'], [0, 1])
    np.testing.assert_array_equal(out['instance_index'], [0, 1])
    assert out['poses'].shape == (2, 3, 4) and out['poses'].dtype == np.float32
    assert out['camera_to_table'].shape == (4, 4) and out['factor_depth'] == 1000.0
    assert 'graspness' not in out and 'voxel_size' not in out
    assert 'masked_cloud' not in out


def test_load_masked_cloud_for_the_collision_filter():
    reader = FakeReader()
    out = LoadGraspScene(source='files', num_points=5, with_masked_cloud=True)(fake_results(reader))
    cloud = depth_to_cloud(reader.depth, reader.meta.intrinsics, 1000.0)
    keep = reader.depth > 0
    keep[2, 3] = False
    assert out['masked_cloud'].dtype == np.float32
    np.testing.assert_array_equal(out['masked_cloud'], cloud[keep].astype(np.float32))
    np.testing.assert_array_equal(out['points'], out['masked_cloud'][out['point_index']])
    packed = PackGraspInputs(keys=('points', ), meta_keys=('masked_cloud', ))(out)
    assert packed['data_samples'].masked_cloud.shape == (10, 3)


def test_load_fake_frame_with_replacement_and_graspness(tmp_path):
    graspness = np.arange(10, dtype=np.float32) / 10
    reader = FakeReader(graspness, tmp_path)
    out = LoadGraspScene(source='files', num_points=25, with_graspness=True, voxel_size=0.005)(
        fake_results(reader))
    idx = out['point_index']
    np.testing.assert_array_equal(idx[:10], np.arange(10))  # all points, then padding
    assert len(idx) == 25 and idx.min() >= 0 and idx.max() < 10
    np.testing.assert_array_equal(out['graspness'], graspness[idx])
    assert out['graspness'].dtype == np.float32 and out['voxel_size'] == 0.005

    reader.graspness = np.zeros(9, np.float32)
    with pytest.raises(DatasetFileError, match=r'graspness\.npy.*9 rows.*10 points'):
        LoadGraspScene(source='files', num_points=25, with_graspness=True)(fake_results(reader))


def test_load_without_workspace_keeps_every_reading():
    out = LoadGraspScene(source='files', num_points=11, use_workspace=False)(
        fake_results(FakeReader()))
    assert out['num_masked'] == 11
    assert sorted(out['point_index']) == list(range(11))


def test_load_synthetic_matches_reference_and_graspness_alignment(synthetic_root, tmp_path):
    # the graspness file under test goes to a folder of the test's own, never the session data
    reader = GraspNetReader(synthetic_root, graspness_dir=str(tmp_path / 'graspness'))
    expected_cloud, expected_seg = reference_masked_cloud(reader, 1, 2)
    # graspness file in masked-cloud order, encoding the row number
    path = reader.graspness_path(1, 2)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rows = np.arange(len(expected_cloud), dtype=np.float64)[:, None]  # GSNet writes (N, 1) f64
    np.save(path, rows)
    out = LoadGraspScene(num_points=3000, with_graspness=True)(
        dict(reader=reader, scene=1, frame=2, rng=sample_rng(0, 0, 7)))
    assert out['num_masked'] == len(expected_cloud) > 3000
    np.testing.assert_array_equal(out['graspness'], out['point_index'].astype(np.float32))
    np.testing.assert_array_equal(out['points'],
                                  expected_cloud[out['point_index']].astype(np.float32))
    np.testing.assert_array_equal(out['seg'], expected_seg[out['point_index']])
    meta = reader.load_meta(1, 2)
    np.testing.assert_array_equal(out['poses'], meta.poses)
    np.testing.assert_array_equal(out['object_ids'], meta.object_ids)
    # every object of the synthetic frame is visible
    assert set(np.unique(out['seg'])) - {0} == set(meta.object_ids + 1)


def test_load_is_deterministic_per_seed_epoch_index(synthetic_root):
    reader = GraspNetReader(synthetic_root)
    load = LoadGraspScene(num_points=2000)

    def run(seed, epoch, index):
        return load(dict(reader=reader, scene=0, frame=1, rng=sample_rng(seed, epoch, index)))

    a, b = run(3, 1, 4), run(3, 1, 4)
    for key in ('points', 'seg', 'point_index', 'poses'):
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a['point_index'], run(3, 2, 4)['point_index'])
    assert not np.array_equal(a['point_index'], run(3, 1, 5)['point_index'])
    assert not np.array_equal(a['point_index'], run(4, 1, 4)['point_index'])


def test_sample_rng_rejects_negative():
    with pytest.raises(ValueError):
        sample_rng(0, -1, 0)


def test_augmentation_matrix_proper_and_improper():
    points = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    poses = np.tile(np.eye(4, dtype=np.float32)[:3], (2, 1, 1))
    for flip_prob, det in ((1.0, -1.0), (0.0, 1.0)):
        out = RandomFlipRotateScene(flip_prob=flip_prob)(
            dict(points=points.copy(), poses=poses.copy(), rng=sample_rng(0, 0, 1)))
        m = out['aug_matrix']
        assert m.dtype == np.float32 and m.shape == (3, 3)
        np.testing.assert_allclose(m @ m.T, np.eye(3), atol=1e-6)
        assert np.linalg.det(m) == pytest.approx(det, abs=1e-5)
        angle = np.arctan2(m[2, 1], m[1, 1])
        assert abs(angle) <= np.pi / 6 + 1e-6
        np.testing.assert_allclose(out['points'], points @ m.T, atol=1e-6)
        np.testing.assert_allclose(out['poses'][:, :, :3], np.stack([m, m]), atol=1e-7)
    # no flip, no rotation: identity
    out = RandomFlipRotateScene(flip_prob=0.0, max_rotation=0.0)(
        dict(points=points.copy(), poses=poses.copy(), rng=sample_rng(0, 0, 1)))
    np.testing.assert_array_equal(out['aug_matrix'], np.eye(3))
    np.testing.assert_array_equal(out['points'], points)


def test_augmentation_always_draws_twice():
    streams = []
    for flip_prob in (0.0, 0.5, 1.0):
        rng = sample_rng(0, 0, 2)
        RandomFlipRotateScene(flip_prob=flip_prob)(
            dict(points=np.zeros((1, 3), np.float32), poses=np.zeros((0, 3, 4), np.float32),
                 rng=rng))
        streams.append(rng.random())
    assert streams[0] == streams[1] == streams[2]


def test_augmentation_points_and_poses_consistent(synthetic_root):
    reader = GraspNetReader(synthetic_root)
    rng = sample_rng(0, 0, 3)
    results = LoadGraspScene(num_points=2000)(dict(reader=reader, scene=0, frame=0, rng=rng))
    before_points, before_poses = results['points'].copy(), results['poses'].copy()
    aug = RandomFlipRotateScene(flip_prob=1.0)
    out = aug(results)
    for i, obj in enumerate(out['object_ids']):
        on_obj = out['seg'] == obj + 1
        r, t = before_poses[i, :, :3].astype(np.float64), before_poses[i, :, 3]
        model = (before_points[on_obj] - t) @ r  # camera -> model frame (original pose)
        r2, t2 = out['poses'][i, :, :3].astype(np.float64), out['poses'][i, :, 3]
        np.testing.assert_allclose(model @ r2.T + t2, out['points'][on_obj], atol=1e-5)
        assert np.linalg.det(r2) == pytest.approx(-1.0, abs=1e-5)
    # bit-identical when repeated
    again = aug(LoadGraspScene(num_points=2000)(
        dict(reader=reader, scene=0, frame=0, rng=sample_rng(0, 0, 3))))
    np.testing.assert_array_equal(again['points'], out['points'])
    np.testing.assert_array_equal(again['poses'], out['poses'])


def _storages(tensors) -> set:
    return {t.untyped_storage().data_ptr() for t in tensors}


def test_pack_inputs_and_sample():
    reader = FakeReader()
    results = LoadGraspScene(source='files', num_points=6, voxel_size=0.01)(fake_results(reader))
    results['poses'] = results['poses'] + np.float32(1)  # as if augmented after labelling
    label_points = torch.arange(12, dtype=torch.float32).view(4, 3)
    results.update(camera='realsense', sample_idx=4, epoch=2,
                   grasp_labels=[ObjectGraspLabels(label_points, torch.zeros(3, 4), 1,
                                                   scores=torch.ones(4, 2, 2, 2))],
                   grasp_label_instances=np.array([1]))
    packed = PackGraspInputs()(results)
    inputs, sample = packed['inputs'], packed['data_samples']
    assert set(inputs) == {'points', 'objectness', 'coors'}
    assert torch.equal(inputs['points'], torch.from_numpy(results['points']))
    assert torch.equal(inputs['objectness'], torch.from_numpy(results['objectness']))
    torch.testing.assert_close(inputs['coors'], inputs['points'] / 0.01)
    assert inputs['objectness'].dtype == torch.int64
    assert isinstance(sample, GraspDataSample)
    assert sample.metainfo == dict(scene=0, frame=0, camera='realsense', sample_idx=4, epoch=2)
    (label,) = sample.grasp_labels
    assert torch.equal(label.pose, torch.from_numpy(results['poses'][1])) and label.object_id == 1
    assert torch.equal(label.points, label_points) and torch.equal(label.scores,
                                                                   torch.ones(4, 2, 2, 2))
    # one storage for the inputs and the label points and pose (dense grids keep theirs)
    assert len(_storages([*inputs.values(), label.points, label.pose])) == 1
    assert 'poses' not in sample and 'reader' not in sample.metainfo
    with pytest.raises(ValueError, match='reader'):
        PackGraspInputs(meta_keys=('scene', 'reader'))


def test_one_buffer_keeps_dtypes_shapes_values():
    arrays = [np.arange(7, dtype=np.int64), np.zeros((0, 3), np.float32),
              np.array([True, False, True]), np.float32(2.5) * np.ones((2, 3), np.float32)[:, ::2],
              np.arange(6, dtype=np.uint16).reshape(2, 3), np.array(3.0)]
    buffer = OneBuffer()
    indices = [buffer.add(a) for a in arrays]
    tensors = buffer.tensors()
    for array, i in zip(arrays, indices):
        tensor = tensors[i]
        assert tensor.dtype == torch.from_numpy(np.ascontiguousarray(array)).dtype
        assert tuple(tensor.shape) == array.shape and tensor.is_contiguous()
        np.testing.assert_array_equal(tensor.numpy(), array)
        assert tensor.storage_offset() * tensor.element_size() % OneBuffer.ALIGN == 0
    assert len(_storages(tensors)) == 1
    tensors[0].add_(1)  # views of disjoint bytes: writing one leaves the others alone
    np.testing.assert_array_equal(tensors[4].numpy(), arrays[4])


def _packed(index):
    results = LoadGraspScene(source='files', num_points=6)(fake_results(FakeReader(), index=index))
    return PackGraspInputs(keys=('points', 'objectness'))(results)


def _packed_in_worker(indices):
    """The samples, and whether their buffers were made in shared memory (in the worker)."""
    samples = [_packed(i) for i in indices]
    return samples, [s['inputs']['points'].untyped_storage().is_shared() for s in samples]


def test_one_buffer_leaves_a_worker_as_one_shared_storage():
    """In a loader worker the buffer is made in shared memory (nothing to copy when sent),
    and the main process gets one storage a sample, with the values packed here."""
    assert not _packed(0)['inputs']['points'].untyped_storage().is_shared()
    loader = torch.utils.data.DataLoader(list(range(2)), batch_size=2, num_workers=1,
                                         collate_fn=_packed_in_worker)
    ((batch, shared),) = list(loader)
    assert shared == [True, True]
    for index, sample in enumerate(batch):
        assert len(_storages(sample['inputs'].values())) == 1
        for key, tensor in _packed(index)['inputs'].items():
            assert torch.equal(sample['inputs'][key], tensor)


def test_data_sample_grasp_labels_property():
    sample = GraspDataSample(metainfo=dict(scene=1))
    sample.grasp_labels = []
    assert sample.grasp_labels == [] and 'grasp_labels' in sample
    with pytest.raises(AssertionError):
        sample.grasp_labels = (1, 2)
    del sample.grasp_labels
    assert 'grasp_labels' not in sample
