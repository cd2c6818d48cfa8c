"""mmgrasp.evaluation.GraspNetEval: graspnetAPI's evaluation methods, signatures and return
shapes, the numbers of mmgrasp's evaluator (and of graspnetAPI on the committed goldens)."""
import inspect
import json
import os
import shutil

import numpy as np
import pytest

from mmgrasp.evaluation import GraspNetEval
from mmgrasp.evaluation.coverage import IncompleteEvaluation
from mmgrasp.evaluation.graspnet_dump_eval import evaluate_dump, summarize
from eval_data import top_down_grasp, write_dump, write_eval_dataset

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'eval_golden')

# graspnetAPI bd6783c graspnet_eval.py, read from its source
GRASPNETAPI_SIGNATURES = {
    '__init__': ['self', 'root', 'camera', 'split'],
    'eval_scene': ['self', 'scene_id', 'dump_folder', 'TOP_K', 'return_list', 'vis',
                   'max_width'],
    'parallel_eval_scenes': ['self', 'scene_ids', 'dump_folder', 'proc'],
    'eval_seen': ['self', 'dump_folder', 'proc'], 'eval_similar': ['self', 'dump_folder', 'proc'],
    'eval_novel': ['self', 'dump_folder', 'proc'], 'eval_all': ['self', 'dump_folder', 'proc']}


def test_signatures_start_as_graspnetapi():
    for name, params in GRASPNETAPI_SIGNATURES.items():
        got = list(inspect.signature(getattr(GraspNetEval, name)).parameters)
        assert got[:len(params)] == params, name


@pytest.fixture
def split_data(tmp_path):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    for scene in (100, 101, 130):
        centres = write_eval_dataset(root, scene=scene, frames=2)
        write_dump(dump, scene, 0, [top_down_grasp(0.9, centres[0]),
                                    top_down_grasp(0.7, centres[1])])
        write_dump(dump, scene, 1, [top_down_grasp(0.8, centres[scene % 2])])
    return root, dump


def test_eval_seen_shapes_and_numbers(split_data):
    root, dump = split_data
    ge = GraspNetEval(root, 'realsense', split='test')
    with pytest.warns(UserWarning, match='seen: 2 of 30 scenes'):
        res, ap = ge.eval_seen(dump, proc=2)
    assert isinstance(res, np.ndarray) and res.shape == (2, 2, 50, 6)
    expected = evaluate_dump(root, dump, 'realsense', [100, 101], progress=False)
    np.testing.assert_array_equal(res, np.stack([expected[100], expected[101]]))
    assert isinstance(ap, float) and ap == pytest.approx(summarize(expected)['AP'] / 100)
    with pytest.warns(UserWarning):
        res_all, aps = ge.eval_all(dump, proc=2)
    assert res_all.shape == (3, 2, 50, 6) and len(aps) == 4
    assert aps[1] == pytest.approx(ap) and np.isnan(aps[3])  # no novel scene on disk
    with pytest.raises(IncompleteEvaluation):
        GraspNetEval(root, 'realsense', require_complete=True).eval_seen(dump)


def test_eval_scene_lists(split_data):
    root, dump = split_data
    ge = GraspNetEval(root, 'realsense')
    acc = ge.eval_scene(100, dump)
    assert isinstance(acc, list) and len(acc) == 2 and acc[0].shape == (50, 6)
    acc2, grasps, scores, collision = ge.eval_scene(100, dump, return_list=True)
    np.testing.assert_array_equal(np.array(acc2), np.array(acc))
    assert len(grasps) == len(scores) == len(collision) == 2
    assert grasps[0].shape == (2, 17) and grasps[0][0, 0] >= grasps[0][1, 0]
    assert np.array(ge.eval_scene(100, dump, TOP_K=20)).shape == (2, 20, 6)
    listed = ge.parallel_eval_scenes([100, 130], dump, proc=2)
    assert len(listed) == 2 and len(listed[0]) == 2
    with pytest.raises(ValueError, match='--diagnose'):
        ge.eval_scene(100, dump, vis=True)


@pytest.mark.slow
def test_equals_the_graspnetapi_goldens(golden_dataset, tmp_path):
    """eval_scene on the committed dumps gives graspnetAPI's per-frame arrays."""
    with open(os.path.join(GOLDEN, 'golden.json')) as f:
        golden = json.load(f)
    # the golden's dataset, built once a session (tests/conftest.py)
    root = golden_dataset(json.loads(golden['meta']['make_synthetic_args']))
    ge = GraspNetEval(root, golden['camera'], sdf_sample_seed=golden['seed'])
    for name in ('gt', 'random'):
        dump = str(tmp_path / name)
        shutil.copytree(os.path.join(GOLDEN, 'dumps', name), dump)
        with np.load(os.path.join(GOLDEN, f'{name}.npz')) as z:
            expected = z['accuracy']
        got = np.array(ge.parallel_eval_scenes(golden['scene_ids'], dump, proc=2))
        np.testing.assert_array_equal(got, expected)


def test_construction_checks_camera_split_and_root_as_graspnetapi(split_data, tmp_path):
    """graspnetAPI asserts the camera (and split) in its constructor; a missing root is named
    as such, not as "no scene of split seen has ... annotations" at the first eval_*."""
    root, _ = split_data
    with pytest.raises(ValueError, match="camera 'realsens': expected one of 'realsense', "
                                         "'kinect'"):
        GraspNetEval(root, 'realsens')
    with pytest.raises(ValueError, match="split 'tset': expected one of 'all', 'train', 'test'"):
        GraspNetEval(root, 'realsense', split='tset')
    missing = str(tmp_path / 'no_such_root')
    with pytest.raises(FileNotFoundError, match=f'dataset root {missing} does not exist'):
        GraspNetEval(missing, 'realsense')
    with pytest.raises(FileNotFoundError, match='has no scenes/ folder'):
        GraspNetEval(str(tmp_path), 'kinect')
    for camera in ('realsense', 'kinect'):
        assert GraspNetEval(root, camera, split='custom').camera == camera
