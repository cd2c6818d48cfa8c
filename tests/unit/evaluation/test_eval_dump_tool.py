"""tools/analysis/eval_dump.py: the table, the JSON in percent, clear errors."""
import json
import os

import pytest

from _scripts import script_module
from eval_data import top_down_grasp, write_dump, write_eval_dataset


def test_eval_dump_prints_table_and_json(tmp_path, capsys):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=2)
    write_dump(dump, 100, 0, [top_down_grasp(0.9, centres[0])])
    write_dump(dump, 100, 1, [])
    out = str(tmp_path / 'ap.json')
    tool = script_module('tools/analysis/eval_dump.py')
    figures = tool.main([root, dump, '--camera', 'realsense', '--scenes', '100', '--json', out,
                         '--no-progress'])
    # frame 0: one good grasp -> precision@k = 1/k for k = 1..50 at every coefficient
    expected = 100 * sum(1 / k for k in range(1, 51)) / 50 / 2
    assert figures['AP'] == pytest.approx(expected)
    printed = capsys.readouterr()
    assert '| seen | 2 | %.2f |' % expected in printed.out
    assert '| camera | realsense |' in printed.out
    # frame 1's empty dump: counted in the table and the JSON, named in a warning
    assert '| frames without grasps | 1 of 2 |' in printed.out
    assert 'warning: mmgrasp-eval: 1 of 2 frames have no grasp in the dump (scene 100: 1); ' \
        'each scores AP 0.' in printed.err
    with open(out) as f:
        payload = json.load(f)
    assert payload['figures']['seen/AP0.4'] == pytest.approx(expected)
    assert payload['figures']['empty_frames'] == 1
    assert payload['empty_frames']['frame_ids'] == {'100': [1]}
    assert payload['coverage']['label'] == \
        'sampled: 2 of 7680 frames, not comparable with published AP'
