"""HGGD's worker transforms: the rectangles against the reference's per-label arithmetic, the
greedy 8-px rule against its literal statement, the loading options, the record checks, the
cloud draw and the packing."""
import math
import types

import numpy as np
import pytest
import torch

from mmgrasp.datasets.transforms import hggd
from mmgrasp.datasets.transforms.hggd import (GRASP_FIELDS, LoadHGGDGrasps, PackHGGDInputs,
                                              SampleDepthPixels)


def make_rows(rng, count, width=320, height=180):
    rows = dict(centers_2d=rng.uniform([0, 0], [width, height], (count, 2)),
                opens_2d=np.zeros((count, 2)),
                thetas_rad=rng.uniform(-np.pi, np.pi, count), gammas_rad=rng.normal(size=count),
                betas_rad=rng.normal(size=count), widths_2d=rng.uniform(4, 80, count),
                heights_2d=rng.uniform(3, 20, count),
                scores_from_6d=rng.choice([0.5, 0.9, 1.0], count),
                object_ids=rng.integers(0, 88, count), center_z_depths=rng.uniform(400, 900, count))
    return {k: rows[k].astype(t) for k, (t, _) in GRASP_FIELDS.items()}


def load(rows, depth=None, rng=None, **options):
    depth = np.full((180, 320), 700, np.uint16) if depth is None else depth
    transform = LoadHGGDGrasps(input_size=(160, 90), **options)
    transform.store = lambda reader: types.SimpleNamespace(frame=lambda scene, frame: rows)
    return transform(dict(reader=types.SimpleNamespace(root='', camera='realsense'), scene=3,
                          frame=7, depth=depth, rng=rng or np.random.default_rng(0)))


def literal_corners(center, theta, width, height):
    """``RectGrasp.points`` as written, one label (numpy scalars)."""
    axis = width / 2 * np.array([np.cos(theta), -np.sin(theta)])
    normal = np.array([-axis[1], axis[0]])
    normal = normal / np.linalg.norm(normal) * height / 2
    return np.array([center + normal + axis, center + normal - axis, center - normal - axis,
                     center - normal + axis], dtype=np.int32)


def test_rectangle_corners_equal_the_per_label_arithmetic():
    rng = np.random.default_rng(0)
    rows = make_rows(rng, 3000, 1280, 720)
    thetas = hggd.wrap_thetas(rows['thetas_rad'])
    got = hggd.rectangle_corners(rows['centers_2d'], thetas, rows['widths_2d'],
                                 rows['heights_2d'])
    want = np.stack([literal_corners(c, t, w, h) for c, t, w, h in zip(
        rows['centers_2d'], thetas, rows['widths_2d'], rows['heights_2d'])])
    np.testing.assert_array_equal(got, want)


def test_wrap_thetas():
    """Outside [−π/2, π/2] wrapped by π (float32 arithmetic); ±π/2 themselves kept."""
    half = np.float32(np.pi / 2)
    thetas = np.float32([0.3, half, -half, np.nextafter(half, 9), -np.pi, 3.0, -2.0])
    wrapped = hggd.wrap_thetas(thetas)
    assert wrapped.dtype == np.float32
    np.testing.assert_array_equal(wrapped[:3], thetas[:3])
    assert (np.abs(wrapped) <= half).all()
    np.testing.assert_allclose(np.cos(2 * wrapped), np.cos(2 * thetas), atol=1e-6)


def literal_greedy(centers, min_distance):
    kept = []
    for i, c in enumerate(centers):
        if all(math.dist(c, centers[j]) >= min_distance for j in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize('min_distance', [8., 5.5, 0.])
def test_greedy_centers_equal_the_literal_rule(min_distance):
    rng = np.random.default_rng(1)
    hubs = rng.integers(0, 160, (30, 2))
    centers = (hubs[rng.integers(0, 30, 1500)] + rng.integers(-9, 10, (1500, 2))).astype(np.int32)
    kept = hggd.greedy_centers(centers, min_distance)
    assert np.flatnonzero(kept).tolist() == literal_greedy(centers, min_distance)
    assert kept.all() if min_distance == 0 else 0 < kept.sum() < len(centers)


def test_greedy_distance_exactly_eight_is_kept():
    centers = np.array([[10, 10], [18, 10], [15, 16], [10, 10]], np.int32)  # 8, 7.8, 0 away
    assert hggd.greedy_centers(centers, 8.).tolist() == [True, True, False, False]


def test_load_hggd_grasps_keys_and_filter():
    rng = np.random.default_rng(2)
    rows = make_rows(rng, 400)
    out = load(rows)
    assert set(out['hggd_grasps']) == set(GRASP_FIELDS)
    assert all(out['hggd_grasps'][k] is rows[k] or np.array_equal(out['hggd_grasps'][k], rows[k])
               for k in rows)  # every row, unfiltered, for the local net
    rects = out['hggd_rects']
    kept = rows['scores_from_6d'] >= 0.8
    assert len(rects['thetas']) == kept.sum() < 400
    assert rects['centers'].dtype == np.int32 and rects['widths'].dtype == np.float64
    assert rects['thetas'].dtype == np.float32 and rects['depths'].dtype == np.float64
    np.testing.assert_array_equal(rects['depths'], rows['center_z_depths'][kept])
    assert 0 < len(rects['heat_centers']) < len(rects['centers'])
    assert out['hggd_max_events'] == 0  # no hole in the depth


def test_load_options_have_consumers():
    rng = np.random.default_rng(3)
    rows = make_rows(rng, 400)
    base = load(rows)['hggd_rects']
    assert len(load(rows, min_score=0.)['hggd_rects']['thetas']) == 400
    assert len(load(rows, min_width=40.)['hggd_rects']['thetas']) < len(base['thetas'])
    assert len(load(rows, min_center_distance=20.)['hggd_rects']['heat_centers']) < \
        len(base['heat_centers'])
    holes = np.full((180, 320), 700, np.uint16)
    holes[:, ::2] = 0
    holes[::2] = 0  # three quarters of every window empty
    events = load(rows, depth=holes)['hggd_max_events']
    assert events > 0
    assert load(rows, depth=holes, ratio=30)['hggd_max_events'] > events
    assert load(rows, depth=holes, anchor_k=1)['hggd_max_events'] > events


def test_max_grasps_draws_from_the_stream():
    rows = make_rows(np.random.default_rng(4), 400)
    first = load(rows, max_grasps=50, rng=np.random.default_rng(9))['hggd_rects']
    again = load(rows, max_grasps=50, rng=np.random.default_rng(9))['hggd_rects']
    other = load(rows, max_grasps=50, rng=np.random.default_rng(10))['hggd_rects']
    assert len(first['thetas']) == 50
    np.testing.assert_array_equal(first['depths'], again['depths'])
    assert not np.array_equal(first['depths'], other['depths'])
    assert set(first['depths']) <= set(rows['center_z_depths'])


def test_empty_record():
    rows = make_rows(np.random.default_rng(5), 0)
    out = load(rows)
    assert out['hggd_rects']['centers'].shape == (0, 2)
    assert out['hggd_rects']['heat_centers'].shape == (0, 2)
    assert out['hggd_max_events'] == 0


@pytest.mark.parametrize('break_it, message', [
    (lambda r: r.pop('betas_rad'), "no field 'betas_rad'"),
    (lambda r: r.update(thetas_rad=r['thetas_rad'].astype(np.float64)), "'thetas_rad' is float64"),
    (lambda r: r.update(widths_2d=r['widths_2d'][:-1]), 'different row counts'),
    (lambda r: r['center_z_depths'].__setitem__(0, np.nan), 'non-finite'),
    (lambda r: r['centers_2d'].__setitem__(0, [400., 10.]), 'outside the 320 x 180 image'),
])
def test_bad_records_are_named(break_it, message):
    rows = make_rows(np.random.default_rng(6), 20)
    break_it(rows)
    with pytest.raises(ValueError, match=message) as info:
        load(rows)
    assert 'scene 3 frame 7' in str(info.value)


def test_sample_depth_pixels():
    rng = np.random.default_rng(7)
    depth = rng.integers(0, 3, (30, 40)).astype(np.uint16)
    valid = np.flatnonzero(depth.reshape(-1) > 0)
    pixels = SampleDepthPixels(300)(dict(depth=depth, rng=np.random.default_rng(0)))
    p = pixels['point_pixels']
    assert p.dtype == np.int64 and len(p) == 300 and len(set(p)) == 300
    assert np.isin(p, valid).all()
    again = SampleDepthPixels(300)(dict(depth=depth, rng=np.random.default_rng(0)))
    np.testing.assert_array_equal(again['point_pixels'], p)
    few = SampleDepthPixels(len(valid) + 50)(dict(depth=depth, rng=np.random.default_rng(0)))
    assert set(few['point_pixels']) == set(valid)  # all of them, the rest repeated
    none = SampleDepthPixels(10)(dict(depth=np.zeros((5, 5), np.uint16),
                                      rng=np.random.default_rng(0)))
    np.testing.assert_array_equal(none['point_pixels'], np.zeros(10))


@pytest.mark.parametrize('layout, camera, reference', [
    ('graspnet', 'realsense', True), ('graspnet', 'kinect', True),
    ('graspclutter6d', 'realsense-d435', False), (None, 'realsense', False)])
def test_pack_hggd_inputs(layout, camera, reference):
    rng = np.random.default_rng(8)
    rows = make_rows(rng, 30)
    results = load(rows)
    dataset_k = np.array([[900., 0, 160], [0, 900, 90], [0, 0, 1]])
    results.update(rgb=rng.integers(0, 256, (180, 320, 3)).astype(np.uint8), camera=camera,
                   intrinsics=dataset_k, factor_depth=1000., sample_idx=0, epoch=0,
                   reader=types.SimpleNamespace(layout=layout, root='', camera=camera),
                   point_pixels=np.arange(10, dtype=np.int64))
    packed = PackHGGDInputs()(results)
    inputs, sample = packed['inputs'], packed['data_samples']
    assert {k: v.dtype for k, v in inputs.items()} == dict(
        rgb=torch.uint8, depth=torch.uint16, point_pixels=torch.int64, intrinsics=torch.float64)
    expected = hggd.REFERENCE_INTRINSICS[camera] if reference else dataset_k
    np.testing.assert_array_equal(inputs['intrinsics'].numpy(), expected)
    assert sample.factor_depth == 1000. and sample.hggd_max_events == 0
    assert set(sample.hggd_grasps) == set(GRASP_FIELDS)
    assert sample.hggd_grasps['centers_2d'].dtype == torch.float64
    assert set(sample.hggd_rects) == {'centers', 'widths', 'thetas', 'depths', 'heat_centers'}


def test_prepare_opens_the_store_once(synthetic_root, monkeypatch):
    """GraspNetDataset opens the store in the main process (before workers fork), once."""
    from mmgrasp.datasets import GraspNetDataset
    opened = []
    monkeypatch.setattr(hggd, 'open_grasp_store', lambda reader, cache_dir, *options: opened.append(
        (reader.root, reader.camera, cache_dir)) or object())
    monkeypatch.setattr(hggd, '_stores', {})
    GraspNetDataset(synthetic_root, pipeline=[dict(type='LoadHGGDGrasps')])
    GraspNetDataset(synthetic_root, pipeline=[dict(type='LoadHGGDGrasps')])
    assert len(opened) == 1 and opened[0][1] == 'realsense'


def test_the_records_are_the_per_image_grasp_store_and_its_options_apply(gc6d_root,
                                                                          monkeypatch):
    """With no stand-in: the store is built on first use (lazily, like the other derived
    assets), each frame's record is its rows, and label_seed / apply_visibility reach it.
    GraspClutter6D's grasps are projected at the frame's own size (GraspNet-1Billion's at its
    native 1280 x 720, which the 320 x 180 session frames are not)."""
    from mmgrasp.datasets.layouts import open_reader
    from mmgrasp.storage.labels.hggd_grasps import open_hggd_grasps
    monkeypatch.setattr(hggd, '_stores', {})
    reader = open_reader(gc6d_root)
    scene, frame = open_hggd_grasps(reader).frames[0]
    depth = reader.load_depth(scene, frame)
    records = {}
    for options in ({}, dict(label_seed=1), dict(apply_visibility=True)):
        transform = LoadHGGDGrasps(input_size=(160, 90), **options)
        record = transform(dict(reader=reader, scene=scene, frame=frame, depth=depth,
                                rng=np.random.default_rng(0)))['hggd_grasps']
        want = open_hggd_grasps(reader, seed=options.get('label_seed', 0),
                                apply_visibility=options.get('apply_visibility', False),
                                build=False).frame(scene, frame)
        for name in GRASP_FIELDS:
            np.testing.assert_array_equal(record[name], getattr(want, name))
        records[tuple(options)] = record, transform.store(reader)
    assert len(records[()][0]['centers_2d']) > 0
    assert len(records[()][0]['centers_2d']) != len(
        records[('apply_visibility',)][0]['centers_2d'])
    # the seed's draws (model points, the 5 000-grasp subsample) may not move a small frame's
    # rows: the store it opened is the seed's own
    assert records[('label_seed',)][1].manifest['seed'] == 1
    assert records[()][1].manifest['seed'] == 0
