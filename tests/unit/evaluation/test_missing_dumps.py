"""A frame without a dump file, the same rule on both datasets: mmgrasp-eval stops naming the
file, the count and the fix; ``--missing-dumps zero`` scores those frames 0 (graspclutter6dAPI's
rule) and the table and the JSON say how many."""
import json
import os

import numpy as np
import pytest

from mmgrasp.evaluation import graspclutter6d_dump_eval as gc6d
from mmgrasp.evaluation.cli import main
from mmgrasp.evaluation.graspnet_dump_eval import evaluate_dump, summarize
from eval_data import top_down_grasp, write_dump, write_eval_dataset
from test_cli_gc6d import _dump


def test_graspnet_missing_dump_is_named_or_scored_zero(tmp_path, capsys):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    write_dump(dump, 100, 0, [top_down_grasp(0.9, centres[0]), top_down_grasp(0.8, centres[1])])
    common = [root, dump, '--camera', 'realsense', '--scenes', '100', '--no-progress']
    missing = os.path.join(dump, 'scene_0100', 'realsense', '0001.npy')
    with pytest.raises(SystemExit, match=rf'{missing}: no dump for this frame \(1 of 2 frames '
                                         r'have none: scene 100: frames 1\)\. Dumps are '
                                         r"GraspNet-1Billion's .*--missing-dumps zero"):
        main(common)
    out = str(tmp_path / 'ap.json')
    figures = main(common + ['--missing-dumps', 'zero', '--json', out])
    frame0 = evaluate_dump(root, dump, 'realsense', [100], {100: [0]}, progress=False)[100]
    assert frame0.any()
    expected = summarize({100: np.concatenate([frame0, np.zeros_like(frame0)])})
    # a frame without a file is a missing dump, not an empty one
    assert figures.pop('empty_frames') == figures.pop('seen/empty_frames') == 0
    assert figures == expected and figures['frames'] == 2
    with open(out) as f:
        payload = json.load(f)
    label = '1 of 2 frames had no dump and scored 0 (scene 100: frames 1)'
    assert payload['missing_dumps'] == dict(rule='zero', count=1, frames={'100': [1]},
                                            label=label)
    assert payload['settings']['missing dumps'] == label
    assert f'| missing dumps | {label} |' in capsys.readouterr().out


def test_gc6d_missing_dumps_are_named_or_scored_zero(gc6d_root, tmp_path, capsys):
    """A GraspClutter6D root with no dump at all used to print AP 0.00 and exit 0; a dump
    folder in GraspNet's naming is named as such."""
    dump = str(tmp_path / 'dump')
    common = [gc6d_root, dump, '--camera', 'realsense', '--split', 'test', '--frames', '0', '1']
    first = os.path.join(dump, '000003', 'realsense-d435', '000002.npy')
    with pytest.raises(SystemExit, match=rf"{first}: no dump for this frame \(2 of 2 frames "
                                         r"have none: scene 3: frames 0-1\)\. Dumps are "
                                         r"GraspClutter6D's .*%06d/realsense-d435/%06d\.npy"):
        main(common)
    capsys.readouterr()
    out = str(tmp_path / 'ap.json')
    figures = main(common + ['--missing-dumps', 'zero', '--json', out])
    assert figures == dict(AP=0.0, **{'AP0.4': 0.0, 'AP0.8': 0.0}, frames=2, empty_frames=0)
    with open(out) as f:
        assert json.load(f)['missing_dumps']['count'] == 2
    assert '2 of 2 frames had no dump and scored 0' in capsys.readouterr().out
    # with the dumps there, the rule changes nothing: only the frames run are evaluated
    reader = _dump(gc6d_root, dump, 'realsense')
    with_dumps = main(common)
    accuracy = gc6d.evaluate_dump(gc6d_root, dump, reader.camera, [3], frames={3: [0, 1]})
    assert accuracy[3].shape == (2, 50, 6)
    assert with_dumps == dict(gc6d.summarize(accuracy), empty_frames=0)


def test_gc6d_frames_with_an_empty_dump_are_counted_and_named(gc6d_root, tmp_path, capsys):
    """As on GraspNet-1Billion: a frame whose dump holds no grasp scores 0, and mmgrasp-eval
    counts it in the figures and the JSON and names it in a warning."""
    dump = str(tmp_path / 'dump')
    reader = _dump(gc6d_root, dump, 'realsense')
    np.save(gc6d.dump_path(dump, 3, reader.camera, reader.image_id(1)),
            np.zeros((0, 17), np.float32))
    out = str(tmp_path / 'ap.json')
    figures = main([gc6d_root, dump, '--camera', 'realsense', '--split', 'test', '--frames',
                    '0', '1', '--json', out])
    assert figures['empty_frames'] == 1 and figures['frames'] == 2
    with open(out) as f:
        assert json.load(f)['empty_frames']['frame_ids'] == {'3': [1]}
    assert ('mmgrasp-eval: 1 of 2 frames have no grasp in the dump (scene 3: 1); each scores '
            'AP 0.') in capsys.readouterr().err
