"""Grasp non-maximum suppression with the ``grasp_nms`` package's rule and arithmetic."""
from __future__ import annotations

import numpy as np

from .sorting import std_sort_descending


def grasp_nms(grasps: np.ndarray, translation_thresh: float = 0.03,
              rotation_thresh: float = 30.0 / 180.0 * np.pi) -> np.ndarray:
    """Greedy NMS over (N, 17) GraspGroup rows, highest score first.

    A grasp is dropped when a kept, better grasp lies closer than ``translation_thresh``
    (metres, translations) AND closer than ``rotation_thresh`` (radians, the angle of
    R1 R2^T). Returns the kept rows in float64, sorted by score, high to low, ties in the
    order grasp_nms's ``std::sort`` (libstdc++) leaves them. The loop is compiled
    (:func:`.compiled.nms_keep`), with grasp_nms's C++ arithmetic.
    """
    from .compiled import nms_keep  # numba: imported on first use
    grasps = np.ascontiguousarray(grasps, dtype=np.float64).reshape(-1, 17)
    rows = grasps[std_sort_descending(grasps[:, 0])]
    keep = np.zeros(len(rows), dtype=bool)
    nms_keep(np.ascontiguousarray(rows[:, 13:16]), np.ascontiguousarray(rows[:, 4:13]),
             float(translation_thresh), float(rotation_thresh), keep)
    return rows[keep]
