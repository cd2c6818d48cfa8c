"""Grasp non-maximum suppression with the ``grasp_nms`` package's rule and arithmetic."""
from __future__ import annotations

import numpy as np

from .sorting import std_sort_descending

_BLOCK = 32  # better grasps whose conflicts are computed in one array operation


def _conflicts(t: np.ndarray, r: np.ndarray, rows: np.ndarray, cols: np.ndarray,
               translation_thresh: float, rotation_thresh: float) -> np.ndarray:
    """(rows, cols) bool: pairs closer than both thresholds, computed as grasp_nms's C++ does
    (``sqrt`` of the squared differences summed x, y, z; the trace of R1 R2^T as the sum of
    the rows' dot products, each summed k = 0, 1, 2), one array operation per term."""
    d = t[rows, None, :] - t[None, cols, :]
    conflict = np.sqrt((d[..., 0] ** 2 + d[..., 1] ** 2) + d[..., 2] ** 2) < translation_thresh
    i, j = np.nonzero(conflict)  # the angle only where the translations are close
    a, b = r[rows[i]], r[cols[j]]
    diag = [(a[:, 3 * k] * b[:, 3 * k] + a[:, 3 * k + 1] * b[:, 3 * k + 1])
            + a[:, 3 * k + 2] * b[:, 3 * k + 2] for k in range(3)]
    trace = np.clip((diag[0] + diag[1]) + diag[2], -1.0, 3.0)
    conflict[i, j] = np.arccos(0.5 * (trace - 1.0)) < rotation_thresh
    return conflict


def grasp_nms(grasps: np.ndarray, translation_thresh: float = 0.03,
              rotation_thresh: float = 30.0 / 180.0 * np.pi) -> np.ndarray:
    """Greedy NMS over (N, 17) GraspGroup rows, highest score first.

    A grasp is dropped when a kept, better grasp lies closer than ``translation_thresh``
    (metres, translations) AND closer than ``rotation_thresh`` (radians, the angle of
    R1 R2^T). Returns the kept rows in float64, sorted by score, high to low, ties in the
    order grasp_nms's ``std::sort`` (libstdc++) leaves them.

    Blocks of the best remaining grasps are compared with every grasp still alive at once;
    inside a block the greedy order is kept row by row.
    """
    grasps = np.ascontiguousarray(grasps, dtype=np.float64).reshape(-1, 17)
    rows = grasps[std_sort_descending(grasps[:, 0])]
    t, r = rows[:, 13:16], rows[:, 4:13]
    alive = np.ones(len(rows), dtype=bool)
    start = 0
    while start < len(rows):
        live = start + np.flatnonzero(alive[start:])
        block, rest = live[:_BLOCK], live
        conflict = _conflicts(t, r, block, rest, translation_thresh, rotation_thresh)
        for n, i in enumerate(block):
            if alive[i]:
                later = rest[n + 1:]
                alive[later[conflict[n, n + 1:]]] = False
        start = block[-1] + 1 if len(block) else len(rows)
    return rows[alive]
