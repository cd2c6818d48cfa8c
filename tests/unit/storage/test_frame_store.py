"""The frame store: samples bit-identical to the PNG/MAT path, the vectorised mask equal to the
reference one, layout, staleness, errors and the CLI."""
import glob
import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
import torch

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.storage.frames.store import (FrameStoreError, aligned_graspness, build_frame_store,
                                          frame_store_path, masked_pixels, open_frame_store,
                                          read_frame)
from mmgrasp.datasets.graspnet_reader import DatasetFileError, GraspNetReader
from mmgrasp.datasets.transforms.loading import LoadGraspScene, depth_to_cloud, workspace_mask
from mmgrasp.utils.random import sample_rng

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture
def dataset_copy(synthetic_root, tmp_path) -> str:
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    return root


def assert_same_results(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert a[key].tobytes() == b[key].tobytes(), key
        elif key not in ('rng', 'reader'):
            assert a[key] == b[key], key


@pytest.mark.parametrize('options', [dict(with_graspness=True),
                                     dict(num_points=60000, use_workspace=False, voxel_size=0.01)])
def test_frames_and_files_give_identical_samples(synthetic_root, options):
    reader = GraspNetReader(synthetic_root)
    files, frames = LoadGraspScene(**options), LoadGraspScene(source='frames', **options)
    for scene in (0, 1):
        for frame in range(3):
            for epoch in (0, 1):
                rngs = [sample_rng(5, epoch, 3 * scene + frame) for _ in range(2)]
                a, b = (t(dict(reader=reader, scene=scene, frame=frame, rng=rng))
                        for t, rng in zip((files, frames), rngs))
                assert_same_results(a, b)
                assert rngs[0].random() == rngs[1].random()  # the same draws were made


def test_dataset_samples_identical_through_the_pipeline(synthetic_root):
    def make(source):
        return GraspNetDataset(synthetic_root, seed=3, pipeline=[
            dict(type='LoadGraspScene', num_points=1500, with_graspness=True, source=source),
            dict(type='SampleGraspLabels', grids='deferred', min_points=10, min_object_points=20),
            dict(type='RandomFlipRotateScene'), dict(type='PackGraspInputs')])

    files, frames = make('files'), make('frames')
    for index in range(len(files)):
        a, b = files[(1, index)], frames[(1, index)]
        for key in a['inputs']:
            assert torch.equal(a['inputs'][key], b['inputs'][key]), key
        for la, lb in zip(a['data_samples'].grasp_labels, b['data_samples'].grasp_labels):
            assert torch.equal(la.points, lb.points) and torch.equal(la.pose, lb.pose)
            assert la.deferred.rows.tobytes() == lb.deferred.rows.tobytes()


def test_vectorised_mask_equals_the_reference_mask(synthetic_root):
    reader = GraspNetReader(synthetic_root)
    depth, seg = reader.load_depth(0, 1), reader.load_segmentation(0, 1)
    meta, c2t = reader.load_meta(0, 1), reader.trajectory(0).camera_to_table(1)
    depth = depth.copy()  # foreground pixels without a reading widen the box to the origin
    depth.reshape(-1)[np.flatnonzero(seg.reshape(-1))[::7]] = 0
    cloud = depth_to_cloud(depth, meta.intrinsics, meta.factor_depth)
    for outlier in (0.02, 0.3):
        reference = np.flatnonzero((depth > 0) & workspace_mask(cloud, seg, c2t, outlier))
        ours = masked_pixels(depth, seg, meta.intrinsics, meta.factor_depth, c2t, outlier)
        np.testing.assert_array_equal(ours, reference)
    np.testing.assert_array_equal(
        masked_pixels(depth, seg, meta.intrinsics, meta.factor_depth, None),
        np.flatnonzero(depth > 0))


def test_layout_and_memory_maps(synthetic_root, tmp_path):
    reader = GraspNetReader(synthetic_root)
    store = build_frame_store(reader, cache_dir=str(tmp_path))
    folder = os.path.dirname(store.path)  # the store's folder holds its versions
    assert folder == frame_store_path(synthetic_root, 'realsense', 0.02, None, str(tmp_path))
    assert os.path.basename(folder).startswith('frames-graspnet-')
    assert folder.endswith('-realsense') and len(store) == 6
    manifest = json.load(open(os.path.join(store.path, 'manifest.json')))
    assert manifest['scenes'] == {'0000': [0, 3], '0001': [3, 3]}
    offsets = np.load(os.path.join(store.path, 'point_offsets.npy'))
    for name, dtype in (('depth', np.uint16), ('pixels', np.int32), ('seg', np.uint8),
                        ('graspness', np.float32)):
        array = np.load(os.path.join(store.path, f'{name}.npy'), mmap_mode='r')
        assert array.dtype == dtype and array.shape == (offsets[-1],), name
    arrays, expected = store.frame(1, 2), read_frame(reader, 1, 2, 0.02, True)
    for name in ('depth', 'pixels', 'seg', 'graspness', 'poses', 'object_ids', 'intrinsics',
                 'camera_to_table'):
        np.testing.assert_array_equal(getattr(arrays, name), getattr(expected, name))
    assert (arrays.width, arrays.factor_depth) == (expected.width, expected.factor_depth)
    with pytest.raises(KeyError, match='scene 1 frame 3 is not in frame store'):
        store.frame(1, 3)


def test_stale_store_is_refused_then_rebuilt(dataset_copy, tmp_path):
    cache = str(tmp_path / 'cache')
    reader = GraspNetReader(dataset_copy)
    build_frame_store(reader, cache_dir=cache)
    depth = reader.frame_path(0, 'depth', 2)
    os.utime(depth, ns=(1, 1))
    with pytest.raises(FrameStoreError, match=r'1 source files changed.*0002\.png.*build_frame'):
        open_frame_store(reader, cache_dir=cache, build=False)
    open_frame_store(reader, cache_dir=cache)
    assert open_frame_store(reader, cache_dir=cache, build=False).frame(0, 2) is not None
    folder = frame_store_path(dataset_copy, 'realsense', 0.02, None, cache)
    assert not glob.glob(os.path.join(folder, 'tmp-*'))
    assert len(glob.glob(os.path.join(folder, 'store-*'))) == 1  # the old version was unused
    # another mask gets its own store
    assert frame_store_path(dataset_copy, 'realsense', None) != frame_store_path(
        dataset_copy, 'realsense', 0.02)


def test_graspness_missing_or_misaligned(dataset_copy, tmp_path):
    reader = GraspNetReader(dataset_copy)
    path = reader.graspness_path(1, 0)
    rows = np.load(path)
    os.remove(path)
    load = LoadGraspScene(num_points=500, with_graspness=True, source='frames',
                          cache_dir=str(tmp_path))
    load.prepare(dataset_copy)
    results = dict(reader=reader, scene=1, frame=1, rng=sample_rng(0, 0, 0))
    assert 'graspness' in load(results)
    with pytest.raises(DatasetFileError, match=r'0000\.npy: file not found when the frame store'):
        load(dict(results, frame=0))
    np.save(path, rows[:-1])  # stale now: the rebuilt store keeps the misaligned file out
    arrays = open_frame_store(reader, cache_dir=str(tmp_path)).frame(1, 0)
    assert arrays.graspness is None and arrays.graspness_rows == len(rows) - 1
    messages = []
    for frame_arrays in (arrays, read_frame(reader, 1, 0, 0.02, with_graspness=True)):
        with pytest.raises(DatasetFileError, match=r'0000\.npy: has \d+ rows but the masked '
                                                   r'cloud of scene 1 frame 0 \(realsense\)') as e:
            aligned_graspness(frame_arrays, reader, 1, 0, 0.02)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_cli_builds_and_reports(synthetic_root, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        'build_frame_store', os.path.join(REPO, 'tools', 'data', 'build_frame_store.py'))
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    cli.main([synthetic_root, '--camera', 'realsense', '--cache', str(tmp_path)])
    out = capsys.readouterr().out
    assert 'frames: 6' in out and 'with graspness: 6' in out and 'x the sources' in out
    assert os.path.isdir(frame_store_path(synthetic_root, 'realsense', 0.02, None, str(tmp_path)))
    with pytest.raises(SystemExit, match='not a directory'):
        cli.main([str(tmp_path / 'missing')])
