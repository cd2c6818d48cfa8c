"""tools/data/build_hggd_labels.py: builds, reports, and each option reaches the asset."""
import json
import os

import pytest

from _scripts import script_module

tool = script_module('tools/data/build_hggd_labels.py')


def run(capsys, *args):
    tool.main(list(args))
    out = capsys.readouterr().out
    path = out.splitlines()[0].split(': ', 1)[1]
    with open(os.path.join(path, 'manifest.json')) as f:
        return out, path, json.load(f)


def test_builds_reports_and_options(synthetic_root, gc6d_root, tmp_path, capsys):
    cache = str(tmp_path)
    out, path, manifest = run(capsys, synthetic_root, '--cache', cache, '--nproc', '2')
    assert 'frames: 6' in out and 'MiB on disk' in out and manifest['camera'] == 'realsense'
    assert run(capsys, synthetic_root, '--cache', cache)[1] == path  # reused
    assert run(capsys, synthetic_root, '--cache', cache, '--force')[1] != path
    out, other, manifest = run(capsys, synthetic_root, '--cache', cache, '--seed', '3',
                               '--apply-visibility')
    assert manifest['seed'] == 3 and manifest['apply_visibility'] and 'visibility applied' in out
    assert os.path.dirname(other) != os.path.dirname(path)
    _, _, manifest = run(capsys, gc6d_root, '--cache', cache, '--camera', 'azure-kinect')
    assert manifest['camera'] == 'azure-kinect' and manifest['layout'] == 'graspclutter6d'


def test_bad_input_is_a_message(synthetic_root, tmp_path):
    with pytest.raises(SystemExit, match='is not a directory'):
        tool.main([str(tmp_path / 'nope')])
    with pytest.raises(SystemExit, match='--nproc 0'):
        tool.main([synthetic_root, '--nproc', '0'])
    with pytest.raises(SystemExit, match="camera='zivid'"):
        tool.main([synthetic_root, '--camera', 'zivid', '--cache', str(tmp_path)])
