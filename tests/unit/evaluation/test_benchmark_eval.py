"""tools/analysis/benchmark_eval.py: with ``--steps`` every step of the evaluation is timed where
the evaluation calls it, a nested step counts once, and the evaluator is left as it was; with
``--scene-cost`` a scene's and a frame's CPU are separated as its help says."""
import time

import pytest

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


def _report(cpu_16: float, cpu_1: float, api: tuple = None) -> tuple:
    """measure()'s reports of one dump at 16 and at 1 frame a scene: mmgrasp on 1 process
    (and graspnetAPI)."""
    entry = dict(frames=0, mmgrasp={'1': dict(cpu_s=cpu_16)}, machine_ceiling={})
    once = dict(frames=0, mmgrasp={'1': dict(cpu_s=cpu_1)}, machine_ceiling={})
    if api:
        entry['graspnetapi'], once['graspnetapi'] = dict(cpu_s=api[0]), dict(cpu_s=api[1])
    return {'d': entry}, {'d': once}


def test_scene_cost_separates_a_scene_from_a_frame_on_both_sides(monkeypatch):
    """3 scenes, 16 frames a scene: mmgrasp 50 ms a scene and 2 ms a frame, graspnetAPI 400 ms
    and 1 600 ms; the tool's second run (1 frame a scene) asked with the same dumps."""
    tool = script_module('tools/analysis/benchmark_eval.py')
    report, once = _report(3 * 0.05 + 48 * 0.002, 3 * 0.05 + 3 * 0.002,
                           api=(3 * 0.4 + 48 * 1.6, 3 * 0.4 + 3 * 1.6))
    asked = []

    def measure(args, root, dumps):
        asked.append((args.frames, args.steps, args.nproc, root, dumps))
        return once
    monkeypatch.setattr(tool, 'measure', measure)
    args = tool.parse_args(['--root', 'R', '--dump', 'd=D', '--frames', '16', '--nproc', '1',
                            '2', '--steps', '--scene-cost'])
    tool.scene_and_frame_costs(args, 'R', {'d': 'D'}, report)
    assert asked == [(1, False, [1], 'R', {'d': 'D'})]
    costs = report['d']['scene_and_frame']
    for side, (scene, frame) in {'mmgrasp': (50, 2), 'graspnetapi': (400, 1600)}.items():
        assert abs(costs[side]['scene_ms'] - scene) < 1e-6 * scene, costs
        assert abs(costs[side]['frame_ms'] - frame) < 1e-6 * frame, costs
    assert abs(costs['protocol_cpu_min'] - (90 * 50 + 23040 * 2) / 6e4) < 1e-9
    row = tool.scene_cost_table(report).splitlines()[2]
    # a frame 1/800; in a 256-frame scene (400/256 + 1600) / (50/256 + 2) = 729.5; 16.00 ms
    assert row == '| d | 400.0 | 1600.00 | 50.0 | 2.00 | 1/800 | 1/730 | 16.00 | 0.84 |', row


def test_scene_cost_without_graspnetapi_and_on_real_frames(tmp_path, capsys):
    tool = script_module('tools/analysis/benchmark_eval.py')
    root, dump = _inputs(tmp_path)
    common = ['--root', root, '--dump', f'd={dump}', '--scenes', '100', '--nproc', '1',
              '--repeat', '1']
    with pytest.raises(SystemExit):
        tool.parse_args(common + ['--frames', '1', '--scene-cost'])
    assert 'F must be at least 2' in capsys.readouterr().err
    report = tool.main(common + ['--frames', '2', '--scene-cost'])
    costs = report['d']['scene_and_frame']
    assert set(costs) == {'mmgrasp', 'protocol_cpu_min', 'nproc'}
    assert costs['mmgrasp']['scene_ms'] + costs['mmgrasp']['frame_ms'] > 0
    out = capsys.readouterr().out
    assert '| d | n/a | n/a |' in out and 'mmgrasp CPU min |' in out
