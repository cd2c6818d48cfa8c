"""tools/analysis/label_oracle_dump.py: the labels' own grasps as a dump. Each row is a label
cell posed as graspnetAPI's loadGrasp poses it (checked against the sanity tests' independent
posing, label_grasps.py), every one the evaluator looks at succeeds, and the same rows with the
approach turned around score far lower (the check can fail)."""
import csv

import numpy as np

from _scripts import script_module
from label_grasps import label_grasps
from mmgrasp.evaluation.diagnostics import diagnose_dump
from mmgrasp.evaluation.graspnet_dump_eval import evaluate_dump, summarize

oracle = script_module('tools/analysis/label_oracle_dump.py')


def test_oracle_rows_are_posed_label_cells(synthetic_root):
    rows = oracle.frame_grasps(oracle.open_reader(synthetic_root, 'realsense'), 1, 2,
                               per_object=20, mu_max=0.4, seed=0)
    every = label_grasps(synthetic_root, 1, 2, 10 ** 9, np.random.default_rng(0))
    assert len(rows) > 20 and set(np.unique(rows[:, 16])) <= set(np.unique(every[:, 16]))
    for row in rows:  # each oracle row is one of the label cells, posed the same way
        same = (every[:, 16] == row[16]) & \
            (np.abs(every[:, 13:16] - row[13:16]).max(1) < 1e-5) & \
            (np.abs(every[:, 4:13] - row[4:13]).max(1) < 1e-5) & \
            (np.abs(every[:, [0, 1, 2, 3]] - row[[0, 1, 2, 3]]).max(1) < 1e-6)
        assert same.any(), row
    # best cells first per object: the scores never rise within an object
    for obj in np.unique(rows[:, 16]):
        assert (np.diff(rows[rows[:, 16] == obj, 0]) <= 1e-7).all()


def test_every_evaluated_oracle_grasp_succeeds_and_a_wrong_pose_does_not(synthetic_root, tmp_path):
    dump, wrong = tmp_path / 'oracle', tmp_path / 'wrong'
    assert oracle.main([synthetic_root, '--scenes', '0', '1', '--dump', str(dump),
                        '--per-object', '50']) == 0
    for path in dump.rglob('*.npy'):
        rows = np.load(path)
        rows[:, 4:13] = (rows[:, 4:13].reshape(-1, 3, 3) * [-1, -1, 1]).reshape(-1, 9)
        target = wrong / path.relative_to(dump)
        target.parent.mkdir(parents=True, exist_ok=True)
        np.save(target, rows)
    good = summarize(evaluate_dump(synthetic_root, str(dump), 'realsense', [0, 1],
                                   progress=False))
    bad = summarize(evaluate_dump(synthetic_root, str(wrong), 'realsense', [0, 1],
                                  progress=False))
    assert np.isfinite(good['AP']) and np.isfinite(bad['AP'])
    assert good['frames'] == 6 and good['AP'] >= 50, good
    assert bad['AP'] < good['AP'] / 3, (good, bad)
    # every oracle grasp the evaluator looks at succeeds (what keeps the AP under 100 on this
    # small dataset is how few grasps survive the NMS, not a failing one)
    counts = diagnosed(synthetic_root, dump, tmp_path / 'diag')
    assert counts['evaluated'] > 0 and counts['force_closure'] == counts['evaluated'], counts
    wrong_counts = diagnosed(synthetic_root, wrong, tmp_path / 'diag_wrong')
    assert wrong_counts['force_closure'] < wrong_counts['evaluated'] / 2, wrong_counts


def diagnosed(root, dump, out) -> dict:
    diagnose_dump(root, str(dump), 'realsense', [0, 1], str(out), ply=False, plots=False)
    with open(out / 'scenes.csv') as f:
        rows = list(csv.DictReader(f))
    return {k: sum(int(r[k]) for r in rows) for k in ('evaluated', 'force_closure')}
