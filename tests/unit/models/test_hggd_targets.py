"""HGGD's 2-D targets (worker rectangles + device rendering) against THU-VCLab/HGGD's own dataset
code (tests/data/hggd_targets_golden, made by tools/analysis/golden/make_hggd_targets_golden.py)
and against the rules written out in numpy (_hggd_rules.py), with mutants that must fail."""
import hashlib
import os
import types

import numpy as np
import pytest
import torch
from PIL import Image

from _hggd_rules import maintain_events, rules_rectangles, rules_targets
from _scripts import script_module
from mmgrasp.datasets.transforms import hggd as worker
from mmgrasp.models.data_preprocessors import HGGDDataPreprocessor
from mmgrasp.models.utils import hggd_targets as targets

pytestmark = pytest.mark.usefixtures('torch_one_thread')

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'hggd_targets_golden', 'golden.npz')
CASES = ('scene', 'holes', 'one', 'none', 'no_depth')
NAMES = ('loc_map', 'cls_mask', 'theta_offset', 'depth_offset', 'width_offset')
SIZE = (640, 360)


@pytest.fixture(scope='module')
def golden():
    data = np.load(GOLDEN)
    case_depth = script_module('tools/analysis/golden/make_hggd_targets_golden.py').case_depth
    cases = {}
    for name in CASES:
        rows = {k: data[f'{name}/{k}'] for k in worker.GRASP_FIELDS}
        cases[name] = dict(rows=rows, depth=case_depth(data, name), rgb=data['rgb'],
                           rects=rules_rectangles(rows, 1280, 640),
                           x_sha1=str(data[f'{name}/x_sha1']),
                           depth_mean=data[f'{name}/depth_mean'],
                           **{k: data[f'{name}/{k}'] for k in NAMES})
    return cases


def worker_rects(rows, depth, **options):
    """LoadHGGDGrasps on one frame whose store serves ``rows``."""
    store = types.SimpleNamespace(frame=lambda scene, frame: rows)
    transform = worker.LoadHGGDGrasps(input_size=SIZE, **options)
    transform.store = lambda reader: store
    reader = types.SimpleNamespace(root='', camera='realsense')
    return transform(dict(reader=reader, scene=0, frame=0, depth=depth,
                          rng=np.random.default_rng(0)))


def device_targets(results, depth, size=SIZE, **options):
    """The device's rendering of a worker's rectangles (one frame)."""
    r = {k: torch.from_numpy(v) for k, v in results['hggd_rects'].items()}
    raw = torch.from_numpy(np.ascontiguousarray(depth.T, np.float32))[None]
    frames = torch.zeros(len(r['thetas']), dtype=torch.int64)
    maps = targets.render_anchor_maps(r['centers'], r['thetas'], r['widths'], r['depths'],
                                      frames, raw, size, results['hggd_max_events'], **options)
    maps['loc_map'] = targets.render_heatmap(
        r['heat_centers'], torch.zeros(len(r['heat_centers']), dtype=torch.int64), 1, size)
    return {k: v[0].numpy() for k, v in maps.items()}


def mismatches(maps, expected) -> dict:
    return {k: int((maps[k] != expected[k]).sum()) for k in NAMES
            if (maps[k] != expected[k]).any()}


@pytest.mark.parametrize('case', CASES)
def test_equals_reference_bit_for_bit(golden, case):
    """Every target of every case equals the reference's, element for element."""
    g = golden[case]
    maps = device_targets(worker_rects(g['rows'], g['depth']), g['depth'])
    assert all(np.isfinite(m).all() for m in maps.values())
    assert mismatches(maps, g) == {}


@pytest.mark.parametrize('case', CASES)
def test_rules_equal_reference(golden, case):
    """The rules as written out (one label at a time) give the reference's targets: the golden
    checks the reading of the rules, not only the vectorised code."""
    g = golden[case]
    assert mismatches(rules_targets(g['rects'], g['depth'].T.astype(np.float32), SIZE), g) == {}


@pytest.mark.parametrize('case', ('scene', 'no_depth'))
def test_image_input_equals_reference(golden, case):
    """The reference's input tensor, redone with PIL and numpy and its own depth mean, is the
    reference's bit for bit (SHA-1); the preprocessor's equals it in the colour channels and
    within 1.2e-7 in the depth channel (its mean in float64: one float32 ulp off numpy
    1.23.5's)."""
    g = golden[case]
    metres = np.array(Image.fromarray(g['depth'].astype(np.float32)).resize(SIZE),
                      np.float32) / 1000.0
    colour = np.array(Image.fromarray(g['rgb']).resize(SIZE), np.float32) / 255.0
    x = np.vstack([np.clip(metres - g['depth_mean'], -1, 1).T[None], colour.transpose(2, 1, 0)])
    assert hashlib.sha1(x.astype(np.float32).tobytes()).hexdigest() == g['x_sha1']
    ours = HGGDDataPreprocessor().images(torch.from_numpy(g['rgb'])[None], torch.from_numpy(
        g['depth'].astype(np.float32))[None])[0].numpy()
    np.testing.assert_array_equal(ours[1:], x[1:])
    assert np.abs(ours[0] - x[0]).max() <= 1.2e-7


def test_golden_cases_exercise_the_quirks(golden):
    """The cases hold what the mutants need: wrapped θ, suppressed centres, cells with two or
    more labels, labels without depth and "maintain" events, labels outside the grid."""
    g = golden['scene']
    rects = g['rects']
    assert len(rects) < len(g['rows']['thetas_rad'])  # the score filter dropped rows
    assert (np.abs(g['rows']['thetas_rad']) > np.pi / 2).sum() > 100
    results = worker_rects(g['rows'], g['depth'])
    assert len(results['hggd_rects']['heat_centers']) < len(rects) / 2
    assert (g['cls_mask'] > 0.5).sum() > 100 and (g['cls_mask'] == np.float32(0.46211717)).any()
    holes = golden['holes']
    assert maintain_events(holes['rects'], holes['depth'].T.astype(np.float32), SIZE) >= 3
    assert (golden['one']['cls_mask'] > 0).sum() == 1
    assert not golden['none']['loc_map'].any() and not golden['none']['cls_mask'].any()
    assert not golden['no_depth']['depth_offset'].any() and golden['no_depth']['cls_mask'].any()


@pytest.mark.parametrize('case', ('scene', 'holes', 'no_depth'))
def test_event_count_equals_the_events(golden, case):
    g = golden[case]
    bound = worker_rects(g['rows'], g['depth'])['hggd_max_events']
    assert bound == maintain_events(g['rects'], g['depth'].T.astype(np.float32), SIZE)


def test_too_small_event_bound_fails_loudly(golden):
    g = golden['holes']
    results = worker_rects(g['rows'], g['depth'])
    results['hggd_max_events'] = 0
    with pytest.raises((IndexError, RuntimeError)):
        device_targets(results, g['depth'])


def test_gaussian_kernel():
    """21 × 21, σ = 21 / 6: peak exactly 1 at the centre, 0.960 one pixel away."""
    k = targets.gaussian_kernel(10)
    assert k.shape == (21, 21) and k[10, 10] == 1.0
    assert k[10, 11] == pytest.approx(np.exp(-1 / (2 * 3.5 ** 2)), rel=1e-15)
    assert k[10, 11] == pytest.approx(0.960, abs=5e-4)


def test_window_medians_match_numpy():
    """The clipped 4 x 4 window median, at the borders too (windows of 2 to 16 pixels)."""
    rng = np.random.default_rng(0)
    depth = rng.integers(0, 4, (2, 40, 30)).astype(np.float32) * rng.integers(0, 2, (2, 40, 30))
    x, y = rng.integers(0, 40, 500), rng.integers(0, 30, 500)
    frames = rng.integers(0, 2, 500)
    got = targets.window_medians(torch.from_numpy(depth), torch.from_numpy(frames),
                                 torch.from_numpy(x), torch.from_numpy(y)).numpy()
    want = [np.median(depth[f, max(0, a - 2):min(39, a + 2), max(0, b - 2):min(29, b + 2)])
            if max(0, a - 2) < min(39, a + 2) and max(0, b - 2) < min(29, b + 2) else np.inf
            for f, a, b in zip(frames, x, y)]
    np.testing.assert_array_equal(got, np.float32(want))


# ------------------------------------------------------------------------------ mutants
def _mutated(monkeypatch, golden, case='holes', **options):
    g = golden[case]
    return mismatches(device_targets(worker_rects(g['rows'], g['depth'], **options),
                                     g['depth']), g)


def test_mutant_sigma(monkeypatch, golden):
    """σ = 10 (the reference's ``sigma`` read as the Gaussian's σ) instead of 21 / 6."""
    def wide(radius=10):
        o = np.arange(-radius, radius + 1)
        return np.exp(-(o[:, None] ** 2 + o[None, :] ** 2) / (2 * 10. ** 2))
    monkeypatch.setattr(targets, 'gaussian_kernel', wide)
    assert set(_mutated(monkeypatch, golden)) == {'loc_map'}


def test_mutant_no_greedy_rule(monkeypatch, golden):
    assert set(_mutated(monkeypatch, golden, min_center_distance=0)) == {'loc_map'}


def test_mutant_no_int_truncation(monkeypatch, golden):
    """Corners rounded to the nearest pixel instead of truncated before halving."""
    monkeypatch.setattr(worker, 'rectangle_corners',
                        lambda c, t, w, h: np.round(_float_corners(c, t, w, h)).astype(np.int32))
    assert _mutated(monkeypatch, golden)


def _float_corners(centers, thetas, widths, heights):
    half = (widths / np.float32(2)).astype(np.float32)
    axis = np.stack([half * np.cos(thetas), half * -np.sin(thetas)], -1)
    normal = np.stack([-axis[:, 1], axis[:, 0]], -1)
    normal = normal / np.linalg.norm(normal, axis=1, keepdims=True) * heights[:, None] / 2
    return np.stack([centers + normal + axis, centers + normal - axis,
                     centers - normal - axis, centers - normal + axis], 1)


def test_mutant_cls_mask_formula(monkeypatch, golden):
    """sigmoid(count) instead of 2 sigmoid(count) - 1."""
    monkeypatch.setattr(targets, 'class_mask', lambda count: 1 / (1 + torch.exp(-count)))
    assert set(_mutated(monkeypatch, golden)) == {'cls_mask'}


def test_mutant_median_window(monkeypatch, golden):
    """A 6 x 6 window instead of 4 x 4."""
    monkeypatch.setattr(targets, 'DEPTH_WINDOW', 3)
    assert set(_mutated(monkeypatch, golden, case='holes')) == {'depth_offset'}


def test_mutant_no_maintain_rule(monkeypatch, golden):
    """Depthless labels count but never rescale their cell's depth sum."""
    def plain(key, has_depth, inside, offsets, groups, max_events):
        values = torch.where(has_depth, offsets, 0.)
        return torch.zeros(groups, dtype=torch.float64).index_add_(0, key, values)
    monkeypatch.setattr(targets, '_maintained_depth_sums', plain)
    assert set(_mutated(monkeypatch, golden, case='holes')) == {'depth_offset'}
