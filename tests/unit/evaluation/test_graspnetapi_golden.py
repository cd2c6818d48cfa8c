"""GraspNetMetric against graspnetAPI itself: golden per-frame accuracy, AP and kept grasps.

``tests/data/eval_golden/`` holds three sets of five small dumps on synthetic test scenes - boxes
seen by the RealSense (the folder itself), and cylinders, spheres, capsules, a torus, an L and a
box (ASCII and binary PLY models) seen by the RealSense (``curved_realsense/``) and the Kinect
(``curved_kinect/``) - and what graspnetAPI (its own environment, numpy 1.23.4; the version its
import reported is in each ``golden.json``) computed for them with
``tools/analysis/golden/make_eval_golden.py``; the README there gives the commands. This test
rebuilds each dataset with the deterministic synthetic writer, runs the metric on copies of the
committed dumps and asserts the per-frame (frames, 50, 6) accuracy arrays, AP, and per frame the
grasps graspnetAPI kept, their friction scores and collision masks, equal.

The metric is imported unconditionally: a module that cannot import it fails, it is not skipped.
"""
import json
import os
import re
import shutil

import numpy as np
import pytest

from mmgrasp.evaluation import scene_models
from mmgrasp.evaluation.functional import evaluate_frame
from mmgrasp.evaluation.graspnet_dump_eval import SceneInputs
from mmgrasp.evaluation.metrics.graspnet_metric import GraspNetMetric
from _scripts import script_module

pytestmark = pytest.mark.slow  # rebuilds the golden datasets (make_synthetic.py)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
GOLDEN_ROOT = os.path.join(REPO, 'tests', 'data', 'eval_golden')
SETS = {'box_realsense': GOLDEN_ROOT,
        'curved_realsense': os.path.join(GOLDEN_ROOT, 'curved_realsense'),
        'curved_kinect': os.path.join(GOLDEN_ROOT, 'curved_kinect')}
DUMPS = ('edge', 'gt', 'gt_tied', 'random', 'shifted')
CASES = [(s, d) for s in SETS for d in DUMPS]


def _golden(golden_set):
    with open(os.path.join(SETS[golden_set], 'golden.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def dataset_root(golden_dataset):
    """{set: its dataset}, rebuilt once a session with the command recorded in golden.json
    (``golden_dataset``, tests/conftest.py: test_graspnet_api_dropin and the scale golden read
    the box set's)."""
    return lambda golden_set: golden_dataset(
        json.loads(_golden(golden_set)['meta']['make_synthetic_args']))


def _fingerprints(root, golden_set):
    module = script_module('tools/analysis/golden/make_golden_dumps.py')
    golden = _golden(golden_set)
    return module.evaluation_inputs_digest(root, golden['camera'], golden['scene_ids'])


@pytest.mark.parametrize('golden_set', SETS)
def test_dataset_matches_the_golden_one(dataset_root, golden_set):
    """The writer still writes what graspnetAPI read (else the goldens must be regenerated)."""
    assert _fingerprints(dataset_root(golden_set), golden_set) == \
        _golden(golden_set)['meta']['evaluation_inputs_sha1'], \
        'the synthetic writer changed the evaluation inputs: rerun tools/analysis/golden (README)'


@pytest.mark.parametrize('golden_set', SETS)
def test_golden_records_what_graspnetapi_reported(golden_set):
    """The version is what the import reported, not a hand-written string."""
    golden = _golden(golden_set)
    identity = golden['graspnetAPI']
    assert isinstance(identity, dict), identity
    assert re.fullmatch(r'\d+\.\d+\.\d+', identity['version']), identity
    assert identity['commit'] is None or re.fullmatch(r'[0-9a-f]{40}', identity['commit'])
    assert identity['imported_from'].endswith(os.path.join('graspnetAPI', '__init__.py'))
    assert golden['numpy'] == '1.23.4' and golden['grasp_nms'] and golden['open3d']
    assert sorted(golden['dumps']) == list(DUMPS)


@pytest.mark.parametrize('golden_set', SETS)
def test_model_points_equal_graspnetapi(dataset_root, golden_set):
    """Each model's points as graspnetAPI read (open3d: ASCII values as doubles) and sampled them
    at 8 mm; a float32 parse of the ASCII models moves boundary points to the next voxel (issue
    23 item 3: the capsule of the curved sets)."""
    root = dataset_root(golden_set)
    with np.load(os.path.join(SETS[golden_set], 'models.npz')) as z:
        expected = {int(k[7:]): z[k] for k in z.files}
    assert expected
    differ = []
    for obj_id, want in sorted(expected.items()):
        got = scene_models.cached_model_points(os.path.join(root, 'models', f'{obj_id:03d}',
                                                      'nontextured.ply'))
        if got.shape != want.shape or not np.array_equal(got[np.lexsort(got.T)],
                                                         want[np.lexsort(want.T)]):
            differ.append(obj_id)
    assert differ == [], f'models whose sampled points differ from graspnetAPI\'s: {differ}'


_metric = {}


@pytest.fixture(scope='module')
def metric_results(dataset_root, tmp_path_factory):
    """(set, dump) -> (figures, {scene: (frames, 50, 6) accuracy}, dump folder) from
    GraspNetMetric, computed on first use."""
    def run(golden_set, name):
        if (golden_set, name) not in _metric:
            golden = _golden(golden_set)
            dump = str(tmp_path_factory.mktemp('dump') / name)
            shutil.copytree(os.path.join(SETS[golden_set], 'dumps', name), dump)
            metric = GraspNetMetric(dataset_root(golden_set), camera=golden['camera'],
                                    dump_dir=dump, progress=False,
                                    sdf_sample_seed=golden['seed'])
            results = [(s, f) for s in golden['scene_ids'] for f in range(golden['frames'])]
            figures = metric.compute_metrics(results)
            per_scene = {}
            for s in golden['scene_ids']:
                with np.load(os.path.join(dump, f'eval_{golden["camera"]}',
                                          f'scene_{s:04d}.npz')) as z:
                    per_scene[s] = z['accuracy']
            _metric[golden_set, name] = (figures, per_scene, dump)
        return _metric[golden_set, name]
    yield run
    _metric.clear()


@pytest.mark.parametrize('golden_set,name', CASES)
def test_per_frame_accuracy_equals_graspnetapi(metric_results, golden_set, name):
    golden = _golden(golden_set)
    with np.load(os.path.join(SETS[golden_set], f'{name}.npz')) as z:
        expected = z['accuracy']
    _, per_scene, _ = metric_results(golden_set, name)
    got = np.stack([per_scene[s] for s in golden['scene_ids']])
    assert got.shape == expected.shape == (len(golden['scene_ids']), golden['frames'], 50, 6)
    bad = np.argwhere(np.any(got != expected, axis=(2, 3)))
    assert len(bad) == 0, f'{name}: frames (scene index, frame) differing from graspnetAPI: ' \
        f'{bad.tolist()}'


@pytest.mark.parametrize('golden_set,name', CASES)
def test_ap_equals_graspnetapi(metric_results, golden_set, name):
    expected = _golden(golden_set)['dumps'][name]
    figures, _, _ = metric_results(golden_set, name)
    # the accuracy arrays are equal; the means may differ only in float summation order
    for key in ('AP', 'AP0.8', 'AP0.4'):
        assert figures[key] == pytest.approx(expected[key], rel=0, abs=1e-9), key
    for split, split_figures in expected['splits'].items():
        for key, value in split_figures.items():
            assert figures[f'{split}/{key}'] == pytest.approx(value, rel=0, abs=1e-9), \
                f'{split}/{key}'


def kept_grasp_differences(golden_set, name, root, dump, expected):
    """[(scene, frame, array name)] where evaluate_frame's kept grasps, friction scores or
    collision masks differ from graspnetAPI's (``expected``: the golden npz's arrays)."""
    golden = _golden(golden_set)
    bad = []
    for scene in golden['scene_ids']:
        inputs = SceneInputs(root, golden['camera'], scene, golden['seed'])
        for frame in range(golden['frames']):
            got = evaluate_frame(*inputs.frame(dump, frame), golden['top_k'])
            key = f'{scene:04d}_{frame:04d}'
            for field in ('grasps', 'scores', 'collision'):
                want = expected[f'{field}_{key}']
                have = got[field]
                if have.shape != want.shape or not np.array_equal(
                        have.astype(want.dtype), want):
                    bad.append((scene, frame, field))
    return bad


def _expected_arrays(golden_set, name):
    with np.load(os.path.join(SETS[golden_set], f'{name}.npz')) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize('golden_set,name', CASES)
def test_kept_grasps_scores_and_collisions_equal_graspnetapi(dataset_root, golden_set, name):
    """Per frame, the rows graspnetAPI kept (NMS, top 10 per object, sorted), their friction
    score (-1: collided, empty or no force closure) and collision-or-empty mask, as committed
    with the goldens."""
    expected = _expected_arrays(golden_set, name)
    dump = os.path.join(SETS[golden_set], 'dumps', name)
    assert kept_grasp_differences(golden_set, name, dataset_root(golden_set), dump,
                                  expected) == []


def test_kept_grasp_check_catches_a_changed_array(dataset_root):
    """Mutations of each per-grasp array are reported (the check above can fail)."""
    golden_set, name = 'curved_realsense', 'gt'
    dump = os.path.join(SETS[golden_set], 'dumps', name)
    expected = _expected_arrays(golden_set, name)
    key = next(k for k in expected if k.startswith('scores_') and len(expected[k]))[7:]
    scene, frame = map(int, key.split('_'))
    for field, mutate in (('scores', lambda a: np.where(np.arange(len(a)) == 0, a + 1, a)),
                          ('collision', lambda a: ~a),
                          ('grasps', lambda a: a[::-1])):
        changed = dict(expected)
        changed[f'{field}_{key}'] = mutate(expected[f'{field}_{key}'])
        assert (scene, frame, field) in kept_grasp_differences(
            golden_set, name, dataset_root(golden_set), dump, changed), field


@pytest.mark.parametrize('golden_set', SETS)
def test_goldens_are_not_trivial(golden_set):
    """The dumps exercise both outcomes: graspnetAPI found good grasps and rejected others."""
    golden = _golden(golden_set)['dumps']
    assert golden['gt']['AP'] > 10 * max(golden['random']['AP'], 0.1)
    assert golden['gt']['AP'] > golden['shifted']['AP']
    assert golden['edge']['empty_frames'], 'the edge dump has its empty frames'
