"""HGGD's per-image grasps equal what HGGD's own ``convert_grasp.py`` wrote (tests/data/hggd_labels_golden,
see its README), bit for bit, given the random draws the script made; the visibility option
equals the script's mask; the independent numpy implementation equals the golden too, and the
mutation of the NMS angle (which the session frames cannot show) is caught; the asset's seed
decides its draws."""
import json
import os

import numpy as np
import pytest

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.storage.labels import hggd
from mmgrasp.storage.labels.hggd_grasps import SceneLabels, open_hggd_grasps
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.utils.random import frame_rng

from _hggd_helpers import FIELDS, mismatches, raw_frame, reference_arrays, reference_grasps
from _scripts import script_module

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
GOLDEN = os.path.join(REPO, 'tests', 'data', 'hggd_labels_golden')
pytestmark = pytest.mark.slow


def record() -> dict:
    with open(os.path.join(GOLDEN, 'record.json')) as f:
        return json.load(f)


def golden_frames() -> dict:
    """(scene, frame) -> the saved fields, the draws as index arrays and the visible mask."""
    out, counts = {}, record()['counts']
    with np.load(os.path.join(GOLDEN, 'golden.npz')) as npz:
        for key in npz.files:
            scene, frame, name = key.split('/')
            out.setdefault((int(scene[6:]), int(frame[6:])), {})[name] = npz[key]
    for (scene, frame), entry in out.items():
        sizes = counts[f'scene_{scene:04d}/frame_{frame:04d}']['draw_populations']
        for name in ('model_points', 'cloud'):
            bits = entry.pop(f'draw_{name}_bits')
            entry[name] = np.flatnonzero(np.unpackbits(bits, count=sizes[f'draw_{name}']))
        if 'draw_subsample' in entry:
            entry['subsample'] = entry.pop('draw_subsample')
    return out


def draws(entry: dict) -> dict:
    return {k: entry[k] for k in ('model_points', 'subsample', 'cloud') if k in entry}


@pytest.fixture(scope='module')
def golden_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('hggd_labels_golden') / 'graspnet')
    script_module('tools/data/make_synthetic.py').main([root, *record()['make_synthetic'],
                                                        '--quiet'])
    rec = record()
    digest = script_module('tools/analysis/golden/make_hggd_labels_golden.py').input_digest(
        root, rec['camera'], rec['scenes'], rec['frames'])
    if digest != rec['input_sha1']:
        pytest.fail(f'the synthetic writer no longer writes the golden\'s inputs (SHA-1 {digest}, '
                    f'golden {rec["input_sha1"]}): regenerate tests/data/hggd_labels_golden as its '
                    f'README says')
    return root


@pytest.fixture(scope='module')
def scenes(golden_root, tmp_path_factory):
    reader = open_reader(golden_root, record()['camera'])
    cache = str(tmp_path_factory.mktemp('cache'))
    store = open_label_store(reader, cache)
    return cache, {s: SceneLabels(reader, store, s) for s in record()['scenes']}


def test_rules_equal_the_reference_script(scenes):
    golden = golden_frames()
    assert len(golden) == 4 and all(len(g['object_ids']) > 50 for g in golden.values())
    for (scene, frame), entry in golden.items():
        arrays, _ = scenes[1][scene].convert(frame, hggd.FrameDraws(**draws(entry)))
        assert mismatches(entry, arrays) == [], (scene, frame)


def test_visibility_option_equals_the_reference_mask(scenes):
    dropped = 0
    for (scene, frame), entry in golden_frames().items():
        if frame != scene:
            continue  # one frame a scene (the golden's four all have invisible grasps)
        visible = entry['visible_mask']
        assert len(visible) == len(entry['object_ids'])  # every centre of the golden is in image
        arrays, _ = scenes[1][scene].convert(frame, hggd.FrameDraws(**draws(entry)),
                                             apply_visibility=True)
        assert mismatches({k: entry[k][visible] for k in FIELDS}, arrays) == [], (scene, frame)
        dropped += int((~visible).sum())
    assert dropped > 0


def test_independent_numpy_equals_golden_and_catches_the_nms_angle(golden_root):
    entry = golden_frames()[(0, 0)]
    raw = raw_frame(golden_root, record()['camera'], 0, 0)
    grasps = reference_grasps(raw, draws(entry))
    assert mismatches(entry, reference_arrays(grasps, raw, draws(entry))) == []
    assert mismatches(entry, reference_arrays(grasps, raw, draws(entry),
                                              nms=(0.02, 30 * np.pi / 180))) != []


def test_the_seed_decides_the_assets_draws(golden_root, scenes):
    """More than 40 000 model points: the draw, and with it the refined centres, follows the
    seed; the asset draws from (seed, scene, camera, frame)."""
    cache, labels = scenes
    asset = open_hggd_grasps(open_reader(golden_root, record()['camera']), cache, seed=1)
    for scene, frame in [(1, 1)]:
        stored = {k: np.asarray(getattr(asset.frame(scene, frame), k)) for k in FIELDS}
        for seed in (1, 0):
            arrays, _ = labels[scene].convert(
                frame, hggd.FrameDraws(frame_rng(seed, scene, 'realsense', frame)))
            assert (mismatches(arrays, stored) == []) == (seed == 1)
