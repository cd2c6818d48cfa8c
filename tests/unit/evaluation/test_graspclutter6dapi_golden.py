"""GraspClutter6D evaluation against graspclutter6dAPI 0.0.3 itself: per-frame kept grasps,
friction scores, collision masks and (13, 50, 6) accuracy, and AP / AP0.4 / AP0.8 per camera.

``tests/data/gc6d_golden/`` holds three dumps (gt, random with background and out-of-range
widths, shifted) on the two test scenes of a synthetic GraspClutter6D root (scene 2 holds one
model twice) for the d435 and the Zivid, and what the API's ``eval_scene`` computed for them
in its own environment (``tools/analysis/golden/regenerate_gc6d.sh``, numpy 1.23.4). This test
rebuilds the dataset with the recorded command and compares mmgrasp's evaluation exactly, with
the API's rule for the 11 annotations without a dump (``missing_dumps='zero'``).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mmgrasp.evaluation import graspclutter6d_dump_eval as gc6d
from _scripts import script_module

pytestmark = pytest.mark.slow  # rebuilds the golden dataset

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'gc6d_golden')


def _golden():
    with open(os.path.join(GOLDEN, 'golden.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def dataset_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('gc6d_golden') / 'synthetic')
    subprocess.run([sys.executable, os.path.join(REPO, 'tools', 'data', 'make_synthetic.py'), root,
                    *_golden()['meta']['make_synthetic_args'], '--quiet'], check=True, cwd=REPO,
                   env={**os.environ, 'PYTHONPATH': os.pathsep.join(
                       [REPO, os.environ.get('PYTHONPATH', '')])})
    return root


def test_dataset_matches_the_golden_one(dataset_root):
    module = script_module('tools/analysis/golden/make_gc6d_golden_dumps.py')
    assert module.evaluation_inputs_digest(dataset_root, [2, 3]) == \
        _golden()['meta']['evaluation_inputs_sha1'], \
        'the synthetic writer changed the evaluation inputs: rerun regenerate_gc6d.sh'


@pytest.mark.parametrize('camera', ['realsense-d435', 'zivid'])
@pytest.mark.parametrize('dump', ['gt', 'random', 'shifted'])
def test_frames_equal_graspclutter6dapi(dataset_root, dump, camera):
    golden = np.load(os.path.join(GOLDEN, f'{dump}_{camera}.npz'))
    dump_dir = os.path.join(GOLDEN, 'dumps', dump)
    details = {}
    accuracy = {s: gc6d.evaluate_scene(dataset_root, dump_dir, camera, s, missing_dumps='zero',
                                       sdf_sample_seed=0, details=details)
                for s in golden['scene_ids'].tolist()}
    assert golden['scene_ids'].tolist() == [2, 3]
    np.testing.assert_array_equal(np.stack([accuracy[s] for s in (2, 3)]), golden['accuracy'])
    keys = sorted(k for k in golden.files if k.startswith('scores_'))
    assert keys == sorted(k for k in details if k.startswith('scores_')) and len(keys) == 4
    for key in keys:
        frame = key[len('scores_'):]
        np.testing.assert_array_equal(details['grasps_' + frame], golden['grasps_' + frame])
        np.testing.assert_array_equal(details['scores_' + frame], golden['scores_' + frame])
        np.testing.assert_array_equal(details['collision_' + frame].astype(bool),
                                      golden['collision_' + frame])
    figures = gc6d.summarize(accuracy)
    want = _golden()['dumps'][f'{dump}_{camera}']
    for name in ('AP', 'AP0.4', 'AP0.8'):
        assert figures[name] == pytest.approx(want[name], abs=1e-9), name
    assert figures['frames'] == 26


def _frames(dataset_root, dump, camera):
    details = {}
    for s in (2, 3):
        gc6d.evaluate_scene(dataset_root, os.path.join(GOLDEN, 'dumps', dump), camera, s,
                            missing_dumps='zero', sdf_sample_seed=0, details=details)
    return details


@pytest.mark.parametrize('rule, value', [('MAX_WIDTH', 0.1), ('BACKGROUND_DISTANCE', 1.0)])
def test_graspnet_rules_do_not_reproduce_graspclutter6dapi(dataset_root, monkeypatch, rule,
                                                           value):
    """The golden tells GraspClutter6D's width clip and background filter from GraspNet's
    (0.1 m, no filter): either mutant changes the kept grasps of the random dump."""
    golden = np.load(os.path.join(GOLDEN, 'random_zivid.npz'))
    monkeypatch.setattr(gc6d, rule, value)
    details = _frames(dataset_root, 'random', 'zivid')
    assert any(not np.array_equal(details['grasps_' + k[7:]], golden['grasps_' + k[7:]])
               for k in golden.files if k.startswith('grasps_'))


def test_parallel_scenes_equal_golden(dataset_root):
    golden = np.load(os.path.join(GOLDEN, 'gt_realsense-d435.npz'))
    accuracy = gc6d.evaluate_dump(dataset_root, os.path.join(GOLDEN, 'dumps', 'gt'),
                                  'realsense', nproc=2, sdf_sample_seed=0,
                                  missing_dumps='zero')  # the test split
    assert sorted(accuracy) == [2, 3]
    np.testing.assert_array_equal(np.stack([accuracy[2], accuracy[3]]), golden['accuracy'])
