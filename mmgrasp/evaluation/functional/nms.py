"""Grasp non-maximum suppression with the ``grasp_nms`` package's rule."""
from __future__ import annotations

import numpy as np


def grasp_nms(grasps: np.ndarray, translation_thresh: float = 0.03,
              rotation_thresh: float = 30.0 / 180.0 * np.pi) -> np.ndarray:
    """Greedy NMS over (N, 17) GraspGroup rows, highest score first.

    A grasp is dropped when a kept, better grasp lies closer than ``translation_thresh``
    (metres, translations) AND closer than ``rotation_thresh`` (radians, the angle of
    R1 R2^T). Returns the kept rows in float64, sorted by score, high to low (ties: input
    order; grasp_nms's std::sort leaves them unspecified).
    """
    grasps = np.ascontiguousarray(grasps, dtype=np.float64).reshape(-1, 17)
    order = np.argsort(-grasps[:, 0], kind='stable')
    rows = grasps[order]
    t = rows[:, 13:16]
    r = rows[:, 4:13]
    alive = np.ones(len(rows), dtype=bool)
    for i in range(len(rows)):
        if not alive[i]:
            continue
        rest = np.flatnonzero(alive[i + 1:]) + i + 1
        if len(rest) == 0:
            break
        dist = np.sqrt(((t[rest] - t[i]) ** 2).sum(axis=1))
        trace = np.clip(r[rest] @ r[i], -1.0, 3.0)
        angle = np.arccos(0.5 * (trace - 1.0))
        alive[rest[(dist < translation_thresh) & (angle < rotation_thresh)]] = False
    return rows[alive]
