"""AP by grasp width against Scale-Balanced-Grasp's evaluate_scale.py protocol run with
graspnetAPI (tests/data/eval_golden_scale, made by tools/analysis/golden/make_scale_golden.py):
per-frame (20, 6) accuracy, kept grasps, friction scores and collision masks equal, and
GraspNetMetric(scale_ap=True)'s figures (what tools/test.py --scale-ap prints) equal the
golden AP."""
import json
import os
import shutil

import numpy as np
import pytest

from mmgrasp.evaluation.functional import evaluate_frame
from mmgrasp.evaluation.graspnet_dump_eval import SIZE_PROTOCOLS, SceneInputs
from mmgrasp.evaluation.metrics.graspnet_metric import GraspNetMetric
from _scripts import script_module

pytestmark = pytest.mark.slow  # rebuilds the golden dataset

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'eval_golden_scale')
with open(os.path.join(GOLDEN, 'golden_scale.json')) as _f:
    META = json.load(_f)
with open(os.path.join(GOLDEN, 'dataset.json')) as _f:
    DATASET = json.load(_f)


@pytest.fixture(scope='module')
def dataset_root(golden_dataset):
    """The recorded dataset, built once a session (tests/conftest.py; the accuracy goldens of
    tests/data/eval_golden read the same one)."""
    return golden_dataset(json.loads(DATASET['make_synthetic_args']))


@pytest.fixture(scope='module')
def inputs(dataset_root):
    return {s: SceneInputs(dataset_root, META['camera'], s, META['seed'])
            for s in META['scene_ids']}


def test_dataset_matches_the_golden_one(dataset_root):
    module = script_module('tools/analysis/golden/make_golden_dumps.py')
    assert module.evaluation_inputs_digest(dataset_root, META['camera'], META['scene_ids']) == \
        DATASET['evaluation_inputs_sha1'], \
        'the synthetic writer changed: rerun tools/analysis/golden/regenerate_scale.sh'


def _frames(inputs, name, protocol):
    dump = os.path.join(GOLDEN, 'dumps', name)
    return {(s, f): evaluate_frame(*inputs[s].frame(dump, f), **protocol.frame_options())
            for s in META['scene_ids'] for f in range(META['frames'])}


@pytest.mark.parametrize('name', sorted(META['dumps']))
def test_per_frame_and_per_grasp_equal_graspnetapi(inputs, name):
    for protocol in SIZE_PROTOCOLS:
        with np.load(os.path.join(GOLDEN, f'{name}_{protocol.name}.npz')) as z:
            golden = dict(z)
        for (s, f), got in _frames(inputs, name, protocol).items():
            i, key = META['scene_ids'].index(s), f'{s:04d}_{f:04d}'
            where = f'{name} {protocol.name} scene {s} frame {f}'
            assert got['accuracy'].shape == (20, 6)
            np.testing.assert_array_equal(got['accuracy'], golden['accuracy'][i, f], where)
            np.testing.assert_array_equal(got['grasps'], golden['grasps_' + key], where)
            np.testing.assert_array_equal(got['scores'], golden['scores_' + key], where)
            np.testing.assert_array_equal(got['collision'], golden['collision_' + key], where)


def test_graspnetapi_protocol_on_the_filtered_dump_is_not_sbg(inputs):
    """Mutation check: graspnetAPI's own eval_grasp (10 per object, 50 precision rows) on the
    width-filtered dump gives another AP than SBG's protocol: the goldens tell them apart."""
    medium = SIZE_PROTOCOLS[1]
    wrong = type(medium)('graspnetapi-medium', 50, 10, medium.width_range)
    ap = 100 * np.mean([r['accuracy'] for r in _frames(inputs, 'gt', wrong).values()])
    assert abs(ap - META['dumps']['gt']['medium']['AP']) > 1.0


def test_metric_scale_figures_equal_graspnetapi(dataset_root, tmp_path):
    for name, sizes in META['dumps'].items():
        dump = str(tmp_path / name)
        shutil.copytree(os.path.join(GOLDEN, 'dumps', name), dump)
        metric = GraspNetMetric(dataset_root, camera=META['camera'], dump_dir=dump,
                                progress=False, sdf_sample_seed=META['seed'], scale_ap=True)
        with pytest.warns(UserWarning, match='sampled'):
            figures = metric.compute_metrics([(s, f) for s in META['scene_ids']
                                              for f in range(META['frames'])])
        for size, expected in sizes.items():
            for key in ('AP', 'AP0.8', 'AP0.4'):
                assert figures[f'{size}/{key}'] == pytest.approx(expected[key], abs=1e-9), \
                    f'{name} {size} {key}'
            for split, values in expected['splits'].items():
                assert figures[f'{size}/{split}/AP'] == pytest.approx(values['AP'], abs=1e-9)
    assert META['dumps']['gt']['large']['AP'] > 50 and META['dumps']['random']['small']
