"""Economic labels: every option changes what it should, the script's quirks, versioned
rebuilds."""
import os

import numpy as np
import pytest

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels.economic import economic_rows
from mmgrasp.storage.labels.economic_store import open_economic_labels
from mmgrasp.storage.labels.store import LabelStoreError, open_label_store


def rows(n=6, V=8, A=3, D=2, seed=0):
    rng = np.random.default_rng(seed)
    mu = rng.choice(np.float32([-1, 0.1, 0.2, 0.3, 0.5, 0.6, 0.8, 1.0]), (n, V, A, D))
    widths = rng.uniform(0.01, 0.14, (n, V, A, D)).astype(np.float32)
    collided = rng.random((n, V, A, D)) < 0.1
    return mu, widths, collided


def test_top_k_keeps_the_best_views():
    full = economic_rows(*rows(), top_k=8)
    top = economic_rows(*rows(), top_k=3)
    assert top['topview'].shape == (6, 3) and full['topview'].shape == (6, 8)
    g = full['vgraspness']
    assert np.all(np.take_along_axis(g, top['topview'].astype(int), 1).min(1)
                  >= np.sort(g, 1)[:, -3])
    assert np.array_equal(top['vgraspness'], full['vgraspness'])


def test_quantize_and_view_dtype():
    q = economic_rows(*rows())
    f = economic_rows(*rows(), quantize=False, view_dtype='int32')
    assert q['scores'].dtype == np.uint8 and f['scores'].dtype == np.float32
    assert q['widths'].dtype == np.uint8 and f['widths'].dtype == np.float32
    assert q['topview'].dtype == np.uint16 and f['topview'].dtype == np.int32
    assert np.array_equal((f['scores'] * np.float32(10)).astype(np.uint8), q['scores'])
    assert np.array_equal((f['widths'] * np.float32(1000)).astype(np.uint8), q['widths'])
    with pytest.raises(ValueError, match='view_dtype'):
        economic_rows(*rows(), view_dtype='uint8')


def test_quirks_truncation_and_float32_score():
    mu = np.full((1, 2, 1, 1), 0.1, np.float32)
    mu[0, 1] = 0.3
    widths = np.full(mu.shape, 0.0999, np.float32)
    out = economic_rows(mu, widths, np.zeros(mu.shape, bool))
    # float32 1.1 − 0.1 is 1.0000001 → 10; 1.1 − 0.3 = 0.8000001·10 → 8 (truncated)
    assert sorted(out['scores'][0].tolist()) == [8, 10]
    assert out['widths'][0].tolist() == [99, 99]  # 99.9 truncated, not rounded


def test_width_is_kept_where_the_score_is_zero_and_wide_widths_wrap():
    mu = np.float32([[[[0.2]], [[-1]]]])
    widths = np.float32([[[[0.05]], [[0.3]]]])
    out = economic_rows(mu, widths, np.zeros(mu.shape, bool))
    by_view = dict(zip(out['topview'][0].tolist(), out['widths'][0].tolist()))
    assert by_view[0] == 50
    assert by_view[1] == np.array([300.0], np.float32).astype(np.uint8)[0]  # the cast's wrap
    assert out['scores'][0][out['topview'][0] == 1] == 0


def test_collision_and_width_cut():
    mu = np.float32([[[[0.2, 0.3]]]])
    widths = np.float32([[[[0.12, 0.05]]]])
    none = np.zeros(mu.shape, bool)
    out = economic_rows(mu, widths, none)
    assert out['depth'][0, 0] == 1 and out['scores'][0, 0] == 8  # 0.2 is wider than 0.1
    collided = np.array([[[[False, True]]]])
    out = economic_rows(mu, widths, collided)
    assert out['scores'][0, 0] == 0  # kept (0.2 ≤ 0.4), but its only narrow cell collides
    assert len(economic_rows(mu, widths, np.ones(mu.shape, bool))['object_row']) == 0


def test_asset_options_and_rebuilds(synthetic_root, tmp_path):
    reader = open_reader(synthetic_root)
    store = open_label_store(reader, str(tmp_path))
    default = open_economic_labels(store)
    other = open_economic_labels(store, top_k=2, quantize=False, view_dtype='int32')
    assert default.path != other.path
    scene = sorted(default.scenes)[0]
    assert default.load(scene, 'topview').shape[1] == store.grid[0]
    assert other.load(scene, 'topview').shape[1] == 2
    assert other.load(scene, 'scores').dtype == np.float32
    entry = default.scenes[scene]
    pointid = default.load(scene, 'pointid')
    for i in range(len(entry.object_ids)):
        start, stop = entry.rows(i)
        assert np.all(pointid[start:stop] == i)
    assert open_economic_labels(store).path == default.path  # up to date: opened
    rebuilt = open_economic_labels(store, force=True)
    assert rebuilt.path != default.path and os.path.isdir(default.path)  # held: kept
    with pytest.raises(KeyError, match='scene'):
        default.file(9999, 'points')


def test_stale_when_the_label_store_changes(synthetic_root, tmp_path):
    reader = open_reader(synthetic_root)
    store = open_label_store(reader, str(tmp_path))
    open_economic_labels(store)
    newer = open_label_store(reader, str(tmp_path), force=True)
    with pytest.raises(LabelStoreError, match='derived from label store version'):
        open_economic_labels(newer, build=False)
    assert open_economic_labels(newer).manifest['label_store'] == os.path.basename(newer.path)
