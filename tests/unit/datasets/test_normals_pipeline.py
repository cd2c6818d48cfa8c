"""Normals through the pipeline: estimated for the sample in the worker (both layouts, both
sources) or recorded for the data preprocessor, packed, batched, mirrored and turned by the
augmentation, and the same from GraspInferencer."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.datasets.transforms.augmentation import RandomFlipRotateScene
from mmgrasp.datasets.transforms.formatting import PackGraspInputs
from mmgrasp.datasets.transforms.loading import LoadGraspScene
from mmgrasp.datasets.transforms.normals import EstimateNormals
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.ops.point_normals import estimate_normals
from mmgrasp.utils.random import sample_rng


def load(root, scene, frame, camera='realsense', **options):
    out = LoadGraspScene(num_points=3000, **options)(dict(
        reader=open_reader(root, camera), scene=scene, frame=frame, rng=sample_rng(0, 0, 5)))
    return EstimateNormals(apply='worker')(out)


def table_angles(out) -> np.ndarray:
    """Degrees between the normals of the sampled table points (background, within 2 mm of the
    table plane z = 0 of the table frame) and the table's up axis seen from the camera."""
    rotation, translation = out['camera_to_table'][:3, :3], out['camera_to_table'][:3, 3]
    height = out['points'].astype(np.float64) @ rotation[2] + translation[2]
    on_table = (out['seg'] == 0) & (np.abs(height) < 0.002)
    assert on_table.sum() > 500
    up = rotation[2]  # the table's z axis in camera coordinates
    cosine = out['normals'][on_table].astype(np.float64) @ up
    return np.degrees(np.arccos(np.clip(cosine, -1, 1)))


@pytest.mark.parametrize('layout', ['graspnet', 'graspclutter6d'])
def test_normals_are_the_samples_rows(layout, synthetic_root, gc6d_root):
    root, scene = (synthetic_root, 1) if layout == 'graspnet' else (gc6d_root, 1)
    out = load(root, scene, 2, source='files')
    normals = out['normals']
    assert normals.dtype == np.float32 and normals.shape == out['points'].shape
    np.testing.assert_array_equal(normals, estimate_normals(out['points']))
    # row for row: the table's points carry the table's normal, facing the camera (signed)
    angles = table_angles(out)
    assert np.median(angles) < 2 and np.percentile(angles, 90) < 10
    # the frame store gives the same sample, so the same normals
    np.testing.assert_array_equal(load(root, scene, 2, source='frames')['normals'], normals)
    plain = LoadGraspScene(num_points=3000)(dict(
        reader=open_reader(root, 'realsense'), scene=scene, frame=2, rng=sample_rng(0, 0, 5)))
    assert 'normals' not in plain
    # the device path records the rule instead, and the rule sits before the augmentation
    pending = EstimateNormals(orientation='solver', scale=1 / 255, apply='device')(dict(plain))
    assert 'normals' not in pending and pending['normal_rule'] == dict(
        radius=0.1, max_nn=30, orientation='solver', scale=1 / 255)
    assert "orientation='solver'" in repr(EstimateNormals(orientation='solver'))
    with pytest.raises(ValueError, match='before RandomFlipRotateScene'):
        EstimateNormals()(dict(plain, aug_matrix=np.eye(3, dtype=np.float32)))
    with pytest.raises(ValueError, match='apply must be one of'):
        EstimateNormals(apply='gpu')


def test_normals_are_packed_and_batched(synthetic_root):
    dataset = GraspNetDataset(synthetic_root, seed=1, pipeline=[
        dict(type='LoadGraspScene', num_points=2000),
        dict(type='EstimateNormals'),
        dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0),
        dict(type='PackGraspInputs', keys=('points', 'normals'))])
    samples = [dataset[i] for i in range(2)]
    for sample in samples:
        assert sample['inputs']['normals'].dtype == torch.float32
        assert sample['inputs']['normals'].shape == (2000, 3)
    batch = GraspDataPreprocessor()(dict(
        inputs={k: [s['inputs'][k] for s in samples] for k in ('points', 'normals')},
        data_samples=[s['data_samples'] for s in samples]))
    assert batch['inputs']['normals'].shape == (2, 2000, 3)
    torch.testing.assert_close(batch['inputs']['normals'][1], samples[1]['inputs']['normals'],
                               rtol=0, atol=0)
    # PackGraspInputs copies what it is given, row for row
    out = load(synthetic_root, 0, 0)
    packed = PackGraspInputs(keys=('points', 'normals')).transform(dict(out))
    np.testing.assert_array_equal(packed['inputs']['normals'].numpy(), out['normals'])


def same_normals(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to rounding but where the k-d tree breaks a tie at the 30th neighbour differently
    (it is rebuilt on the moved cloud): 99.5 % within 1e-5, all within 1°, signs included."""
    close = np.abs(a - b).max(axis=1) < 1e-5
    cosine = (a.astype(np.float64) * b).sum(axis=1)
    return bool(close.mean() >= 0.995 and cosine.min() > np.cos(np.radians(1.0)))


def augment(out, **options):
    return RandomFlipRotateScene(**options)(dict(out, rng=np.random.default_rng(0)))


def test_the_mirror_leaves_normals_unless_asked(synthetic_root):
    out = load(synthetic_root, 0, 1)
    mirror = np.float32([-1, 1, 1])
    kept = augment(out, flip_prob=1.0, max_rotation=0.0)
    np.testing.assert_array_equal(kept['points'], out['points'] * mirror)
    np.testing.assert_array_equal(kept['normals'], out['normals'])  # FineGrasp's training
    flipped = augment(out, flip_prob=1.0, max_rotation=0.0, flip_normals=True)
    np.testing.assert_array_equal(flipped['normals'], out['normals'] * mirror)
    # the mirrored normals are the mirrored cloud's own (facing the camera, as estimated there)
    own = estimate_normals(flipped['points'])
    assert same_normals(flipped['normals'], own) and not same_normals(kept['normals'], own)
    unflipped = augment(out, flip_prob=0.0, max_rotation=0.0, flip_normals=True)
    np.testing.assert_array_equal(unflipped['normals'], out['normals'])
    assert 'flip_normals=True' in repr(RandomFlipRotateScene(flip_normals=True))


@pytest.mark.parametrize('flip_normals', [False, True])
def test_the_rotation_turns_normals_with_the_cloud(synthetic_root, flip_normals):
    out = load(synthetic_root, 0, 1)
    turned = augment(out, flip_prob=1.0, max_rotation=np.pi / 6, flip_normals=flip_normals)
    matrix = turned['aug_matrix'].astype(np.float64)
    rotation = matrix @ np.diag([-1.0, 1, 1])  # M = Rx(θ) F
    assert not np.allclose(rotation, np.eye(3))
    expected = out['normals'] @ (matrix if flip_normals else rotation).T
    np.testing.assert_allclose(turned['normals'], expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(turned['normals'], axis=1), 1, atol=1e-5)
    if flip_normals:  # a turn about the camera keeps them facing it: the turned cloud's own
        assert same_normals(turned['normals'], estimate_normals(turned['points']))


def test_the_inferencer_gives_the_datasets_normals(small_gsnet_files, synthetic_root,
                                                   tmp_path):
    """A config whose test pipeline loads normals: GraspInferencer's pipeline for a dataset
    frame (its workspace and frame id) packs the test dataset's normals, bit for bit."""
    from mmgrasp.apis import GraspInferencer
    from mmgrasp.storage.frames.store import frame_workspace

    base, checkpoint = small_gsnet_files
    config = str(tmp_path / 'with_normals.py')  # normals in the worker
    with open(config, 'w') as f:
        f.write(f"""
_base_ = ['{base}']
test_dataloader = dict(dataset=dict(pipeline=[
    dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
    dict(type='EstimateNormals'),
    dict(type='PackGraspInputs', keys=('points', 'normals'),
         meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
""")
    inferencer = GraspInferencer(config, checkpoint)
    assert inferencer.pipeline[1].apply == 'worker'
    dataset = GraspNetDataset(synthetic_root, split='train', test_mode=True, seed=0,
                              pipeline=[dict(type='LoadGraspScene', num_points=1200),
                                        dict(type='EstimateNormals'),
                                        dict(type='PackGraspInputs',
                                             keys=('points', 'normals'))])
    reader = dataset.reader
    for index in (0, 4):
        info = dataset.get_data_info(index)
        scene, frame = info['scene'], info['frame']
        expected = dataset[index]['inputs']
        meta = reader.load_meta(scene, frame)
        got = inferencer._sample(index, reader.load_depth(scene, frame), meta.intrinsics,
                                 meta.factor_depth, frame_workspace(reader, scene, frame),
                                 (scene, 'realsense', frame))['inputs']
        torch.testing.assert_close(got['points'], expected['points'], rtol=0, atol=0)
        torch.testing.assert_close(got['normals'], expected['normals'], rtol=0, atol=0)
    # and the model gets them (demo/grasp_demo.py predicts through this call)
    seen = []
    predict = inferencer.model.predict

    def spy(inputs, data_samples=None):
        seen.append(inputs['normals'])
        return predict(inputs, data_samples)

    inferencer.model.predict = spy
    meta = reader.load_meta(scene, frame)
    inferencer(reader.load_depth(scene, frame), meta.intrinsics, meta.factor_depth,
               segmentation=reader.load_segmentation(scene, frame),
               camera_to_table=reader.trajectory(scene).camera_to_table(frame),
               frame_id=(scene, 'realsense', frame))
    assert len(seen) == 1 and seen[0].shape == (1, 1200, 3)
    torch.testing.assert_close(seen[0][0], expected['normals'], rtol=0, atol=0)
