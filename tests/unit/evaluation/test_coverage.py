"""An incomplete split or a frame sample is evaluated, labelled as such and warned about, the
same way in eval_dump.py / mmgrasp-eval and GraspNetMetric (tools/test.py); --require-complete
makes it an error."""
import json
import os

import numpy as np
import pytest
import torch

from mmgrasp.evaluation.metrics import GraspNetMetric
from _scripts import script_module
from eval_data import top_down_grasp, write_dump, write_eval_dataset

LABEL = 'sampled: 2 of 7680 frames, not comparable with published AP'


@pytest.fixture
def one_seen_scene(tmp_path):
    """Scene 100 only (1 of the 30 seen scenes), 2 frames: a good grasp in frame 0, one in the
    air (empty) in frame 1."""
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    write_dump(dump, 100, 0, [top_down_grasp(0.9, centres[0])])
    write_dump(dump, 100, 1, [top_down_grasp(0.8, centres[1] + np.array([0, 0, -0.2]))])
    return root, dump, centres


def test_eval_dump_split_with_missing_scenes_is_labelled(one_seen_scene, capsys):
    root, dump, _ = one_seen_scene
    out = os.path.join(dump, 'ap.json')
    eval_dump = script_module('tools/analysis/eval_dump.py')
    figures = eval_dump.main([root, dump, '--camera', 'realsense', '--split', 'seen',
                              '--json', out, '--no-progress'])
    assert figures['seen/frames'] == 2
    captured = capsys.readouterr()
    assert f'**{LABEL}** (seen: 1 of 30 scenes (100), frames 0-1)' in captured.out
    assert f'| frames | {LABEL} |' in captured.out
    assert 'warning: mmgrasp-eval: ' + LABEL in captured.err
    with open(out) as f:
        cov = json.load(f)['coverage']
    assert not cov['complete'] and cov['splits']['seen']['scenes'] == [100]
    assert cov['frame_ids'] == {'100': [0, 1]}
    with pytest.raises(SystemExit, match='require_complete'):
        eval_dump.main([root, dump, '--camera', 'realsense', '--split', 'seen',
                        '--require-complete', '--no-progress'])


def test_eval_dump_frame_stride_and_list(one_seen_scene, capsys):
    root, dump, _ = one_seen_scene
    tool = script_module('tools/analysis/eval_dump.py')
    every = tool.main([root, dump, '--camera', 'realsense', '--scenes', '100', '--no-progress'])
    first = tool.main([root, dump, '--camera', 'realsense', '--scenes', '100',
                       '--frame-stride', '2', '--no-progress'])
    second = tool.main([root, dump, '--camera', 'realsense', '--scenes', '100',
                        '--frames', '1', '--no-progress'])
    assert first['frames'] == second['frames'] == 1 and every['frames'] == 2
    assert first['AP'] != second['AP']  # frame 0 and frame 1 differ: the option acts
    assert every['AP'] == pytest.approx((first['AP'] + second['AP']) / 2)
    assert 'sampled: 1 of 7680 frames' in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r'frames \[5\] have no annotation'):
        tool.main([root, dump, '--camera', 'realsense', '--scenes', '100', '--frames', '5',
                   '--no-progress'])


def test_metric_labels_an_incomplete_split(one_seen_scene):
    root, dump, centres = one_seen_scene
    samples = [dict(scene=100, frame=f, camera='realsense',
                    pred_grasps=torch.tensor(np.array([top_down_grasp(0.9, centres[0])]),
                                             dtype=torch.float32)) for f in (0, 1)]
    metric = GraspNetMetric(data_root=root, dump_dir=dump, progress=False, split='test_seen')
    metric.process({}, samples)
    with pytest.warns(UserWarning, match=LABEL):
        figures = metric.evaluate(2)
    assert figures['graspnet/sampled'] == f'{LABEL} (seen: 1 of 30 scenes (100), frames 0-1)'
    with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
        assert json.load(f)['coverage']['label'] == LABEL
    from mmgrasp.evaluation.coverage import IncompleteEvaluation
    strict = GraspNetMetric(data_root=root, dump_dir=dump, progress=False, split='test_seen',
                            require_complete=True)
    strict.process({}, samples)
    with pytest.raises(IncompleteEvaluation, match='1 of 30 scenes'):
        strict.evaluate(2)


def test_coverage_complete_and_denominators():
    from mmgrasp.evaluation.coverage import coverage, describe_frames
    whole = {s: range(256) for s in range(100, 130)}
    assert coverage(whole, 'test_seen')['complete'] and coverage(whole)['label'] == ''
    # the whole seen split is 1/3 of 'test'
    cov = coverage(whole, 'test')
    assert not cov['complete'] and cov['label'].startswith('sampled: 7680 of 23040 frames')
    assert 'similar: 0 of 30 scenes' in cov['details']
    strided = coverage({s: range(0, 256, 10) for s in range(100, 130)}, 'seen')
    assert strided['label'].startswith('sampled: 780 of 7680 frames')
    assert 'frames 0-250 step 10 of each' in strided['details']
    assert 'outside' in coverage({0: [0, 1]})['details']
    assert describe_frames([0, 1, 2, 5, 7, 8]) == '0-2, 5, 7-8'
