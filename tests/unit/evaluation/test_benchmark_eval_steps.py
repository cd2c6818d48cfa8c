"""tools/analysis/benchmark_eval.py --steps: every step of the evaluation is timed where the
evaluation calls it, a nested step counts once, and the evaluator is left as it was."""
import os
import time

from _scripts import script_module
from eval_data import top_down_grasp, write_dump, write_eval_dataset

import mmgrasp.evaluation.functional.frame_eval as frame_eval
from mmgrasp.geometry import PosedTable


def _inputs(tmp_path):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    for frame in range(2):  # grasps on both spheres: they reach the force-closure test
        write_dump(dump, 100, frame, [top_down_grasp(0.9, centres[0]),
                                      top_down_grasp(0.8, centres[1], dy=0.004)])
    return root, dump


def test_steps_times_every_step_once_and_restores_the_evaluator(tmp_path):
    tool = script_module('tools/analysis/benchmark_eval.py')
    root, dump = _inputs(tmp_path)
    before = {attr: getattr(frame_eval, attr) for attr in tool.STEPS.values()}
    inside = PosedTable.inside
    steps = tool.step_times(root, dump, 'realsense', [100], 2, 0, 1)
    assert set(steps) == {'frame inputs', *tool.STEPS, tool.TABLE_STEP, 'rest', 'total'}
    assert all(v > 0 for k, v in steps.items() if k != 'rest'), steps
    assert steps['rest'] >= -1e-3, steps
    assert {attr: getattr(frame_eval, attr) for attr in tool.STEPS.values()} == before
    assert PosedTable.inside is inside


def test_steps_option_adds_the_table(tmp_path, capsys):
    tool = script_module('tools/analysis/benchmark_eval.py')
    root, dump = _inputs(tmp_path)
    common = ['--root', root, '--dump', f'd={dump}', '--scenes', '100', '--frames', '2',
              '--nproc', '1', '--repeat', '1']
    assert 'steps' not in tool.main(common)['d']
    assert 'collision test' not in capsys.readouterr().out
    report = tool.main(common + ['--steps'])
    out = capsys.readouterr().out
    assert report['d']['steps']['total'] > 0
    assert '| step (CPU ms/frame, 1 proc, models read) | d |' in out
    assert '| collision test in the workspaces (gripper_contacts) |' in out


def test_a_nested_step_counts_in_the_outer_one(tmp_path, monkeypatch):
    """transform_points poses the models (2 objects x 2 frames) and also runs inside
    grasps_friction: with every call made to cost 20 ms of CPU, the models' step holds the 4
    outer calls only."""
    tool = script_module('tools/analysis/benchmark_eval.py')
    root, dump = _inputs(tmp_path)
    calls, real = [], frame_eval.transform_points

    def slow(*args):
        calls.append(1)
        start = time.process_time()
        while time.process_time() - start < 0.02:
            pass
        return real(*args)
    monkeypatch.setattr(frame_eval, 'transform_points', slow)
    steps = tool.step_times(root, dump, 'realsense', [100], 2, 0, 1)
    assert len(calls) > 4  # the force-closure test posed grasps too
    assert 0.08 <= steps['models posed (transform_points)'] < 0.095, steps
    assert steps['force-closure test (grasps_friction)'] >= 0.02 * (len(calls) - 4), steps
