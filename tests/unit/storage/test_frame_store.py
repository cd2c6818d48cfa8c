"""The frame store: samples bit-identical to the PNG/MAT path, the vectorised mask equal to the
reference one, layout, staleness, errors and the CLI."""
import glob
import json
import multiprocessing
import os
import shutil
import time

import numpy as np
import pytest
import torch

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.transforms import loading
from mmgrasp.storage.frames import store as store_module
from mmgrasp.storage.frames.store import (PARALLEL_FRAMES, FrameStoreError, aligned_graspness,
                                          build_frame_store, build_workers, frame_store_path,
                                          masked_pixels, open_frame_store, read_frame)
from mmgrasp.datasets.graspnet_reader import DatasetFileError, GraspNetReader
from mmgrasp.datasets.transforms.loading import LoadGraspScene, depth_to_cloud, workspace_mask
from mmgrasp.utils.random import sample_rng
from _scripts import script_module


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
    files, frames = LoadGraspScene(source='files', **options), LoadGraspScene(**options)
    assert frames.source == 'frames'  # the default
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
    cli = script_module('tools/data/build_frame_store.py')
    cli.main([synthetic_root, '--camera', 'realsense', '--cache', str(tmp_path)])
    out = capsys.readouterr().out
    assert 'frames: 6' in out and 'with graspness: 6' in out and 'x the sources' in out
    assert os.path.isdir(frame_store_path(synthetic_root, 'realsense', 0.02, None, str(tmp_path)))
    with pytest.raises(SystemExit, match='not a directory'):
        cli.main([str(tmp_path / 'missing')])


def store_files(version: str) -> dict:
    return {name: open(os.path.join(version, name), 'rb').read()
            for name in sorted(os.listdir(version)) if name.endswith('.npy')}


def test_a_dataset_builds_its_store_once_before_workers_fork(dataset_copy, tmp_path,
                                                             monkeypatch):
    """The default source builds the store when the dataset is made (the main process); loader
    workers read the store they inherit and never open one (a fork sees the refusal below)."""
    monkeypatch.setenv('MMGRASP_CACHE', str(tmp_path / 'cache'))
    dataset = GraspNetDataset(dataset_copy, pipeline=[
        dict(type='LoadGraspScene', num_points=300), dict(type='PackGraspInputs')])
    folder = frame_store_path(dataset_copy, 'realsense', 0.02, None, str(tmp_path / 'cache'))
    assert len(glob.glob(os.path.join(folder, 'store-*'))) == 1

    def refuse(*args, **kwargs):
        raise AssertionError('a loader worker opened the frame store')

    monkeypatch.setattr(loading, 'open_frame_store', refuse)
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=2,
                                         collate_fn=lambda batch: batch)
    assert sum(len(batch) for batch in loader) == 6


def _open_slowly(root: str, cache: str, barrier, out) -> None:
    """A process opening a missing store at the same time as another (whose build is slow)."""
    build_into = store_module._build_into

    def slow(*args, **kwargs):
        out.put('build')
        time.sleep(1.0)
        return build_into(*args, **kwargs)

    store_module._build_into = slow
    barrier.wait()
    out.put(open_frame_store(GraspNetReader(root), cache_dir=cache).path)


def test_processes_opening_a_missing_store_build_it_once(synthetic_root, tmp_path):
    """Two processes (DDP ranks, two jobs) on first use: one builds under the lock, the other
    waits and opens the same version."""
    context = multiprocessing.get_context('fork')
    barrier, out = context.Barrier(2), context.Queue()
    cache = str(tmp_path / 'cache')
    processes = [context.Process(target=_open_slowly, args=(synthetic_root, cache, barrier, out))
                 for _ in range(2)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=300)
    assert [p.exitcode for p in processes] == [0, 0]
    messages = [out.get(timeout=5) for _ in range(3)]
    assert messages.count('build') == 1
    paths = {m for m in messages if m != 'build'}
    assert len(paths) == 1 and os.path.isdir(paths.pop())


@pytest.mark.parametrize('workers', [1, 2])
def test_an_undecodable_frame_fails_the_build_naming_its_file(dataset_copy, tmp_path, workers):
    reader = GraspNetReader(dataset_copy)
    broken = reader.frame_path(1, 'depth', 1)
    with open(broken, 'wb') as f:
        f.write(b'not a PNG')
    with pytest.raises(DatasetFileError, match='cannot decode PNG') as error:
        open_frame_store(reader, cache_dir=str(tmp_path), workers=workers)
    assert error.value.path == broken
    assert any("source='files'" in note for note in error.value.__notes__)
    folder = frame_store_path(dataset_copy, 'realsense', 0.02, None, str(tmp_path))
    assert os.listdir(folder) == []  # no version, no CURRENT, no temporary folder left


def test_parallel_build_writes_the_same_store(synthetic_root, tmp_path):
    serial = build_frame_store(GraspNetReader(synthetic_root), cache_dir=str(tmp_path / 'a'),
                               workers=1)
    parallel = build_frame_store(GraspNetReader(synthetic_root), cache_dir=str(tmp_path / 'b'),
                                 workers=2)
    assert store_files(serial.path) == store_files(parallel.path)
    assert build_workers(6) == 1 and build_workers(6, 3) == 3
    assert build_workers(PARALLEL_FRAMES) == max(1, min(8, len(os.sched_getaffinity(0))))
    with pytest.raises(ValueError, match='workers must be >= 1'):
        build_workers(6, 0)


def test_a_store_of_another_root_or_version_is_rebuilt_never_read(dataset_copy, synthetic_root,
                                                                  tmp_path, monkeypatch):
    cache = str(tmp_path / 'cache')
    theirs = open_frame_store(GraspNetReader(synthetic_root), cache_dir=cache)
    mine = frame_store_path(dataset_copy, 'realsense', 0.02, None, cache)
    shutil.copytree(os.path.dirname(theirs.path), mine)  # a store folder copied from elsewhere
    reader = GraspNetReader(dataset_copy)
    with pytest.raises(FrameStoreError, match='it was built with root='):
        open_frame_store(reader, cache_dir=cache, build=False)
    rebuilt = open_frame_store(reader, cache_dir=cache)
    assert rebuilt.manifest['root'] == reader.root
    monkeypatch.setattr(store_module, 'FORMAT_VERSION', store_module.FORMAT_VERSION + 1)
    with pytest.raises(FrameStoreError, match='format version 1, this mmgrasp reads 2'):
        open_frame_store(reader, cache_dir=cache, build=False)
    assert open_frame_store(reader, cache_dir=cache).manifest['format_version'] == 2
