"""HGGD's per-image grasp asset on the session datasets: equal to the independent numpy
implementation written from convert_grasp.py (GraspNet-1Billion and GraspClutter6D), each rule's
mutation caught, the store's layout, options, staleness, resumable and parallel builds, and
degenerate frames. The comparison with the reference script itself is test_hggd_labels_golden.py."""
import os
import pickle
import shutil

import numpy as np
import pytest

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels import hggd, hggd_grasps
from mmgrasp.storage.labels.hggd_grasps import open_hggd_grasps
from mmgrasp.storage.labels.store import LabelStoreError, open_label_store
from mmgrasp.utils.random import frame_rng

from _hggd_helpers import FIELDS, mismatches, raw_frame, reference_frame


@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp('hggd_cache'))


@pytest.fixture(scope='module')
def asset(synthetic_root, cache):
    return open_hggd_grasps(open_reader(synthetic_root), cache)


def frame_dict(grasps) -> dict:
    return {name: np.asarray(getattr(grasps, name)) for name in FIELDS}


def test_asset_equals_independent_numpy_graspnet(asset, synthetic_root):
    assert asset.frames == [(s, f) for s in (0, 1) for f in range(3)]
    total = 0
    for scene, frame in asset.frames:
        grasps = asset.frame(scene, frame)
        expected = reference_frame(raw_frame(synthetic_root, 'realsense', scene, frame), {})
        assert mismatches(expected, frame_dict(grasps)) == [], (scene, frame)
        np.testing.assert_array_equal(grasps.intrinsics, hggd.intrinsics_matrix(
            927.17, 927.37, 651.32, 349.62))
        total += len(grasps)
    assert total > 50  # the comparison saw grasps


def test_asset_equals_independent_numpy_gc6d(gc6d_root, cache):
    reader = open_reader(gc6d_root, 'zivid')  # its own intrinsics, size and depth scale
    asset = open_hggd_grasps(reader, cache)
    total = 0
    for scene, frame in asset.frames:
        raw = raw_frame(gc6d_root, reader.camera, scene, frame)
        grasps = asset.frame(scene, frame)
        assert mismatches(reference_frame(raw, {}), frame_dict(grasps)) == [], (scene, frame)
        np.testing.assert_array_equal(grasps.intrinsics, raw['intrinsics'])  # the dataset's
        total += len(grasps)
    assert total > 20


@pytest.fixture(scope='module')
def session_frame(synthetic_root, asset):
    """The session frame with the most grasps, raw, and its asset arrays."""
    scene, frame = max(asset.frames, key=lambda f: len(asset.frame(*f)))
    return raw_frame(synthetic_root, 'realsense', scene, frame), frame_dict(
        asset.frame(scene, frame))


@pytest.mark.parametrize('mutation', [
    dict(mu_dtype=np.float64),  # μ ≤ 0.2 compared in float64 drops μ = 0.2
    dict(max_mu=0.3),
    dict(approach_sign=-1.0),
    dict(width_range=(0.03, 0.1)),
    dict(depth_range=(0.025, 0.035)),
    dict(refined=False),
    dict(nms=(0.03, 60 * np.pi / 180)),  # the angle's mutation: test_hggd_labels_golden.py
    dict(image_size=(640, 360)),
])
def test_mutations_are_caught(session_frame, mutation):
    raw, asset_arrays = session_frame
    assert mismatches(reference_frame(raw, {}, **mutation), asset_arrays) != []


def test_visibility_option_applies_the_reference_mask(synthetic_root, cache, asset):
    visible = open_hggd_grasps(open_reader(synthetic_root), cache, apply_visibility=True)
    assert visible.path != asset.path and visible.manifest['apply_visibility']
    dropped = 0
    for scene, frame in visible.frames:
        raw = raw_frame(synthetic_root, 'realsense', scene, frame)
        pixels = int((raw['depth'] > 0).sum())  # 320 x 180 frames: more than 40 000 pixels
        cloud = frame_rng(0, scene, 'realsense', frame).choice(pixels, hggd.CLOUD_POINTS,
                                                              replace=False)
        expected = reference_frame(raw, dict(cloud=cloud), apply_visibility=True)
        assert mismatches(expected, frame_dict(visible.frame(scene, frame))) == []
        dropped += len(asset.frame(scene, frame)) - len(visible.frame(scene, frame))
    assert dropped > 0


def test_frame_layout_and_errors(asset):
    grasps = asset.frame(0, 0)
    for name, (shape, dtype) in hggd.FIELDS.items():
        array = getattr(grasps, name)
        assert array.dtype == dtype and array.shape == (len(grasps), *shape), name
    assert np.all(np.isfinite(grasps.centers_2d)) and set(grasps.scores_from_6d) <= {
        np.float32(1.0), np.float32(1.1) - np.float32(0.2)}
    with pytest.raises(KeyError, match='scene 0 frame 7 is not in the HGGD grasps'):
        asset.frame(0, 7)
    copy = pickle.loads(pickle.dumps(asset))  # maps the files again rather than carry them
    assert len(pickle.dumps(asset)) < 4096 and isinstance(copy.arrays['centers_2d'].base,
                                                           np.memmap)
    assert mismatches(frame_dict(copy.frame(0, 0)), frame_dict(grasps)) == []


def test_degenerate_frames_give_typed_empty_arrays(synthetic_root):
    matrix = hggd.intrinsics_matrix(*hggd.GRASPNET_INTRINSICS['kinect'])
    empty = hggd.frame_grasps([], matrix, (1280, 720), hggd.FrameDraws())
    raw = raw_frame(synthetic_root, 'realsense', 0, 0)
    blocked = [hggd.InstanceLabels(o['id'], o['pose'], o['points'], o['scores'],
                                   o['offsets'][..., 2], np.ones_like(o['collision']), o['model'])
               for o in raw['objects']]  # every cell collides
    nothing = hggd.frame_grasps(blocked, matrix, (1280, 720), hggd.FrameDraws(),
                                camera_pose=raw['camera_pose'])
    for arrays in (empty, nothing):
        for name, (shape, dtype) in hggd.FIELDS.items():
            assert arrays[name].dtype == dtype and arrays[name].shape == (0, *shape)


def test_draws_are_validated_and_taken_whole_when_small():
    draws = hggd.FrameDraws(model_points=np.array([3, 1]))
    assert draws.take('model_points', 5, 2).tolist() == [3, 1]
    assert draws.take('cloud', 4, 10).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match='expected 2 distinct indices below 5'):
        hggd.FrameDraws(subsample=np.array([1, 1])).take('subsample', 5, 2)
    with pytest.raises(ValueError, match='needs a generator'):
        hggd.FrameDraws().take('subsample', 9, 2)
    with pytest.raises(ValueError, match='unknown draws'):
        hggd.FrameDraws(views=np.arange(2))


def test_subsample_and_model_draws_feed_the_frame(session_frame):
    """Where the 5 000 / 40 000 limits bite (here made small), the given draws decide the
    output, and equal the independent implementation's with the same draws."""
    raw, _ = session_frame
    instances = [hggd.InstanceLabels(o['id'], o['pose'], o['points'], o['scores'],
                                     o['offsets'][..., 2], o['collision'], o['model'])
                 for o in raw['objects']]
    grasps = hggd.label_grasps(instances, raw['camera_pose'])
    n = int(hggd.hggd_mask(grasps).sum())
    points = len(hggd.scene_model_points(instances))
    outs = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        given = dict(model_points=rng.choice(points, points // 3, replace=False),
                     subsample=rng.choice(n, n // 2, replace=False))
        out = hggd.frame_grasps(instances, raw['intrinsics'], (1280, 720),
                                hggd.FrameDraws(**given), camera_pose=raw['camera_pose'],
                                max_grasps=n // 2, model_points=points // 3)
        assert mismatches(reference_frame(raw, given, max_grasps=n // 2), out) == []
        outs.append(out)
    assert mismatches(*outs) != []


def test_reopen_stale_resume_and_parallel(synthetic_root, tmp_path, monkeypatch):
    root = str(tmp_path / 'root')
    shutil.copytree(synthetic_root, root)
    for parent, dirs, files in os.walk(root):
        os.chmod(parent, 0o755)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o644)
    reader, cache = open_reader(root), str(tmp_path / 'cache')
    open_label_store(reader, cache)
    calls = []
    real = hggd_grasps.scene_grasps

    def killed_at_scene_1(reader, store, scene, *args):
        calls.append(scene)
        if scene == 1:
            raise KeyboardInterrupt  # the build dies after scene 0 was saved
        return real(reader, store, scene, *args)

    monkeypatch.setattr(hggd_grasps, 'scene_grasps', killed_at_scene_1)
    with pytest.raises(KeyboardInterrupt):
        open_hggd_grasps(reader, cache)
    with pytest.raises(LabelStoreError, match='does not exist.*build_hggd_labels.py'):
        open_hggd_grasps(reader, cache, build=False)
    monkeypatch.setattr(hggd_grasps, 'scene_grasps', lambda *a: calls.append(a[2]) or real(*a))
    resumed = open_hggd_grasps(reader, cache)
    assert calls == [0, 1, 1]  # scene 0 was not converted again
    assert not [e for e in os.listdir(os.path.dirname(resumed.path)) if e.startswith('partial-')]
    assert open_hggd_grasps(reader, cache).path == resumed.path and calls == [0, 1, 1]
    # a changed annotation makes the asset stale: a new version, the old one kept while held
    xml = reader.annotation_path(1, 2)
    os.utime(xml, ns=(os.stat(xml).st_atime_ns, os.stat(xml).st_mtime_ns + 10 ** 9))
    with pytest.raises(LabelStoreError, match="pose or depth files changed.*scene 1 frame 2"):
        open_hggd_grasps(reader, cache, build=False)
    rebuilt = open_hggd_grasps(reader, cache, nproc=2)
    assert rebuilt.path != resumed.path and os.path.isdir(resumed.path)
    for key in rebuilt.frames:
        assert mismatches(frame_dict(resumed.frame(*key)), frame_dict(rebuilt.frame(*key))) == []


def test_bad_options_are_refused(synthetic_root, cache):
    with pytest.raises(ValueError, match='seed=-1'):
        open_hggd_grasps(open_reader(synthetic_root), cache, seed=-1)
    with pytest.raises(ValueError, match='nproc=0'):
        open_hggd_grasps(open_reader(synthetic_root), cache, nproc=0)
