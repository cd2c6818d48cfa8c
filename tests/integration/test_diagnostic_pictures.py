"""Diagnostics pictures: outcomes_by_rank.png (the outcome breakdown per rank, from the same
per-grasp outcomes as the CSVs) and each frame's grasps drawn on its RGB image by outcome."""
import csv
import os

import cv2
import numpy as np

from _scripts import script_module
from label_grasps import shifted_grasps
from mmgrasp.evaluation.diagnostics import OUTCOME_COLOURS, diagnose_dump, rank_outcomes

oracle = script_module('tools/analysis/label_oracle_dump.py')


def test_rank_outcomes_counts_each_rank():
    kinds = [np.array(['force_closure', 'empty', 'collided']), np.array(['collided'])]
    shares = rank_outcomes(kinds, 4)
    np.testing.assert_array_equal(shares['force_closure'], [0.5, 0, 0, 0])
    np.testing.assert_array_equal(shares['collided'], [0.5, 0, 0.5, 0])
    np.testing.assert_array_equal(shares['empty'], [0, 0.5, 0, 0])
    np.testing.assert_array_equal(shares['none'], [0, 0.5, 0.5, 1])
    np.testing.assert_allclose(sum(shares.values()), np.ones(4))


def colour_pixels(image_rgb: np.ndarray, colour) -> int:
    return int((np.abs(image_rgb.astype(int) - colour).max(axis=2) <= 12).sum())


def test_frame_pictures_and_rank_plot(synthetic_root, tmp_path):
    dump, out = tmp_path / 'dump', tmp_path / 'diag'
    reader = oracle.open_reader(synthetic_root, 'realsense')
    rng = np.random.default_rng(0)
    for frame in range(3):
        good = oracle.frame_grasps(reader, 0, frame, 10, 0.4, 0)
        off = shifted_grasps(good, rng, 0.03)
        off[:, 0] -= 0.5  # below the good ones
        folder = dump / 'scene_0000' / 'realsense'
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / f'{frame:04d}.npy', np.concatenate([good, off]))
    diagnose_dump(synthetic_root, str(dump), 'realsense', [0], str(out), ply=False)
    assert os.path.getsize(out / 'outcomes_by_rank.png') > 0
    kinds = set()
    for frame in range(3):
        with open(out / 'scene_0000' / f'{frame:04d}.csv') as f:
            frame_kinds = {r['outcome'] for r in csv.DictReader(f)}
        kinds |= frame_kinds
        png = cv2.cvtColor(cv2.imread(str(out / 'scene_0000' / f'{frame:04d}.png')),
                           cv2.COLOR_BGR2RGB)
        rgb = cv2.cvtColor(cv2.imread(reader.frame_path(0, 'rgb', frame)), cv2.COLOR_BGR2RGB)
        assert png.shape[0] == rgb.shape[0] and png.shape[1] > rgb.shape[1]  # the legend's strip
        png = png[:, :rgb.shape[1]]
        for name in frame_kinds:  # each outcome seen is drawn in its colour
            assert colour_pixels(png, OUTCOME_COLOURS[name]) > \
                colour_pixels(rgb, OUTCOME_COLOURS[name]) + 10, name
    assert {'force_closure'} < kinds, kinds  # the shifted copies fail some way
