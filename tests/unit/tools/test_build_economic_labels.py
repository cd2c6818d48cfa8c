"""tools/data/build_economic_labels.py: builds, reports, and each option reaches the asset."""
import os

import numpy as np
import pytest

from _scripts import script_module

tool = script_module('tools/data/build_economic_labels.py')


def run(capsys, *args):
    tool.main(list(args))
    return capsys.readouterr().out


def asset_path(out):
    return out.splitlines()[0].split(': ', 1)[1]


def test_builds_reports_and_options(synthetic_root, tmp_path, capsys):
    cache = str(tmp_path)
    first = run(capsys, synthetic_root, '--cache', cache)
    assert 'kept points:' in first and 'MiB on disk' in first and 'uint8 scores' in first
    path = asset_path(first)
    assert np.load(os.path.join(path, 'scenes', '0000', 'scores.npy')).dtype == np.uint8
    assert asset_path(run(capsys, synthetic_root, '--cache', cache)) == path  # reused
    assert asset_path(run(capsys, synthetic_root, '--cache', cache, '--force')) != path
    other = asset_path(run(capsys, synthetic_root, '--cache', cache, '--top-k', '2', '--float',
                           '--view-dtype', 'int32'))
    assert np.load(os.path.join(other, 'scenes', '0000', 'scores.npy')).dtype == np.float32
    top = np.load(os.path.join(other, 'scenes', '0000', 'topview.npy'))
    assert top.dtype == np.int32 and top.shape[1] == 2


def test_missing_root_is_a_message(tmp_path):
    with pytest.raises(SystemExit, match='is not a directory'):
        tool.main([str(tmp_path / 'nope')])
