"""mmgrasp-eval --diagnose: per-grasp CSVs whose counts add up (collided + empty + scored =
evaluated) and whose mu column gives back the accuracy array the AP is the mean of; tables,
plots and PLY scenes written."""
import csv
import os

import numpy as np
import pytest

from mmgrasp.evaluation.diagnostics import diagnose_dump
from mmgrasp.evaluation.functional import EVAL_FRICTION_COEFFICIENTS
from mmgrasp.evaluation.graspnet_dump_eval import evaluate_dump
from _scripts import script_module
from eval_data import top_down_grasp, write_dump, write_eval_dataset


def _read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def precision_from_csv(rows, top_k=50):
    """eval_scene's precision@k, recomputed from the CSV's mu column in rank order."""
    mu = np.array([float(r['mu']) for r in sorted(rows, key=lambda r: int(r['rank']))])
    acc = np.zeros((top_k, len(EVAL_FRICTION_COEFFICIENTS)))
    for j, c in enumerate(EVAL_FRICTION_COEFFICIENTS):
        for k in range(top_k):
            top = mu[:k + 1]
            acc[k, j] = np.sum((top > 0) & (top <= c)) / (k + 1)
    return acc


def narrow_turned_grasp(score, centre):
    """A 3 cm grasp turned 90 degrees about the approach (NMS keeps it next to the top-down
    grasp on the same sphere): its fingers enter the 6 cm sphere."""
    row = top_down_grasp(score, centre, width=0.03)
    row[4:13] = np.stack([[0, 0, 1.0], [0, 1.0, 0], [-1.0, 0, 0]], axis=1).reshape(-1)
    return row


def check_diagnostics(root, dump, out, scenes, camera='realsense', frames=None):
    """The checks of the issue, shared with the integration test on a model's dump; returns
    how many grasps were evaluated."""
    chosen = None if frames is None else {s: frames for s in scenes}
    reference = evaluate_dump(root, dump, camera, scenes, chosen, progress=False)
    table = {(int(r['scene']), int(r['frame'])): r
             for r in _read(os.path.join(out, 'frames.csv'))}
    evaluated = 0
    for s in scenes:
        for n, acc in zip(frames or range(len(reference[s])), reference[s]):
            rows = _read(os.path.join(out, f'scene_{s:04d}', f'{n:04d}.csv'))
            counts = table[(s, n)]
            kinds = [r['outcome'] for r in rows]
            assert int(counts['evaluated']) == len(rows)
            assert int(counts['collided']) + int(counts['empty']) + int(counts['scored']) == \
                len(rows)
            assert int(counts['collided']) == kinds.count('collided') == \
                sum(r['collided'] == 'True' for r in rows)
            assert int(counts['scored']) == kinds.count('force_closure') + \
                kinds.count('no_force_closure')
            # the accuracy array the AP is the mean of, given back by the CSV
            np.testing.assert_array_equal(precision_from_csv(rows), acc)
            assert os.path.getsize(os.path.join(out, f'scene_{s:04d}', f'{n:04d}.ply')) > 0
            evaluated += len(rows)
    objects = _read(os.path.join(out, 'objects.csv'))
    assert sum(int(r['evaluated']) for r in objects) == evaluated
    for name in ('precision_at_k.png', 'ap_vs_mu.png', 'scenes.csv'):
        assert os.path.getsize(os.path.join(out, name)) > 0
    return evaluated


def test_diagnose_counts_add_up(tmp_path, capsys):
    root, dump, out = str(tmp_path / 'data'), str(tmp_path / 'dump'), str(tmp_path / 'diag')
    centres = write_eval_dataset(root, scene=100, frames=2)
    rows = [top_down_grasp(0.9, centres[0]), top_down_grasp(0.8, centres[1]),
            top_down_grasp(0.6, centres[0] + np.array([0, 0, -0.2])),  # in the air: empty
            narrow_turned_grasp(0.5, centres[1]),  # narrower than the sphere: collides
            top_down_grasp(0.4, centres[0] + np.array([0.2, 0, 0]))]  # beside it: nothing
    write_dump(dump, 100, 0, rows)
    write_dump(dump, 100, 1, rows[1:3])
    figures = script_module('tools/analysis/eval_dump.py').main(
        [root, dump, '--camera', 'realsense', '--scenes', '100', '--diagnose', out,
         '--no-progress'])
    assert 'diagnostics: ' + out in capsys.readouterr().out
    assert check_diagnostics(root, dump, out, [100]) >= 5
    kinds = [r['outcome'] for r in _read(os.path.join(out, 'scene_0100', '0000.csv'))]
    assert {'collided', 'empty', 'force_closure'} <= set(kinds)
    expected = evaluate_dump(root, dump, 'realsense', [100], progress=False)[100]
    assert figures['AP'] == pytest.approx(100 * expected.mean())
    with open(os.path.join(out, 'scene_0100', '0000.ply'), 'rb') as f:
        header = f.read(400).decode('ascii', 'replace')
    assert 'comment collided 220 40 40' in header and 'element face' in header


def test_diagnose_size_protocol(tmp_path):
    """Diagnostics of a size of the split come from that protocol's evaluation."""
    from mmgrasp.evaluation.graspnet_dump_eval import SIZE_PROTOCOLS
    root, dump, out = str(tmp_path / 'data'), str(tmp_path / 'dump'), str(tmp_path / 'diag')
    centres = write_eval_dataset(root, scene=100, frames=1)
    write_dump(dump, 100, 0, [top_down_grasp(0.9, centres[0]),
                              top_down_grasp(0.8, centres[1], width=0.05)])
    acc = diagnose_dump(root, dump, 'realsense', [100], out, protocol=SIZE_PROTOCOLS[2],
                        ply=False, plots=False)[100]
    rows = _read(os.path.join(out, 'scene_0100', '0000.csv'))
    assert acc.shape == (1, 20, 6) and len(rows) == 1 and float(rows[0]['width']) >= 0.07
