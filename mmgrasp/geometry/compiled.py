"""Compiled loops (numba) for the geometry rules whose numpy form pays for every grasp-point
pair: the evaluation's gripper test runs ~10^5 pairs a frame, nearly all of them outside the
jaws' height band, and as array operations each pair costs a dozen passes over memory.

The loops keep the numpy forms' arithmetic: every sum is written out in the order the array
code evaluated it, no fused multiply-add and no reassociation (numba's default, ``fastmath``
off), so each verdict is the one the array rule gives (tests/unit/geometry/test_compiled.py
checks them against the rule over every pair). numba is imported on first use, not with
:mod:`mmgrasp.geometry`; compiled code is cached next to this file or in the user's cache
folder, and compiled in memory for each process where neither can be written.
"""
from __future__ import annotations

import numba
import numpy as np


def _compiled(function):
    """``numba.njit`` with the machine code cached on disk; where numba finds no folder it may
    write (a read-only install without a user cache), the function is compiled in memory
    instead of failing the import."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError as err:
        if 'no locator available' not in str(err):
            raise
        return numba.njit(nogil=True)(function)


@_compiled
def jaw_contacts(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, translation: np.ndarray,
                 rotation: np.ndarray, depth: np.ndarray, half: np.ndarray, outer: np.ndarray,
                 band: float, base: float, base_outer: float, empty_thresh: int,
                 hit: np.ndarray, empty: np.ndarray) -> None:
    """graspnetAPI's finger, palm and between-the-jaws regions for every grasp against the
    points strictly inside the box ``lo``-``hi``; fills ``hit`` (a point in a finger or the
    palm) and ``empty`` (fewer than ``empty_thresh`` points between the jaws).

    Per grasp g (float64 throughout): ``d = p - t``, the gripper coordinates ``x, y, z`` as
    ``(d0 r0j + d1 r1j) + d2 r2j`` for column j of R; ``abs(z) < band``; the fingers span
    ``-base < x < depth``, the palm ``-base_outer < x < -base``, the sides ``half < |y| <
    outer``. A grasp stops at its first point once both verdicts are known.
    """
    count = 0
    inside = np.empty(points.shape[0], np.int64)
    for p in range(points.shape[0]):
        if lo[0] < points[p, 0] < hi[0] and lo[1] < points[p, 1] < hi[1] \
                and lo[2] < points[p, 2] < hi[2]:
            inside[count] = p
            count += 1
    for g in range(translation.shape[0]):
        t0, t1, t2 = translation[g, 0], translation[g, 1], translation[g, 2]
        r = rotation[g]
        between = 0
        touched = False
        for k in range(count):
            p = inside[k]
            d0 = points[p, 0] - t0
            d1 = points[p, 1] - t1
            d2 = points[p, 2] - t2
            z = (d0 * r[0, 2] + d1 * r[1, 2]) + d2 * r[2, 2]
            if not (z > -band and z < band):
                continue
            x = (d0 * r[0, 0] + d1 * r[1, 0]) + d2 * r[2, 0]
            y = (d0 * r[0, 1] + d1 * r[1, 1]) + d2 * r[2, 1]
            along = x > -base and x < depth[g]
            beyond_left = y > -outer[g]
            inner_left = y < -half[g]
            beyond_right = y < outer[g]
            inner_right = y > half[g]
            palm = x > -base_outer and x < -base
            if (along and beyond_left and inner_left) or (along and beyond_right and inner_right) \
                    or (beyond_left and beyond_right and palm):
                touched = True
            if along and not inner_left and not inner_right:
                between += 1
            if touched and between >= empty_thresh:
                break
        hit[g] = touched
        empty[g] = between < empty_thresh


@_compiled
def nearest_rows(queries: np.ndarray, points: np.ndarray, out: np.ndarray) -> None:
    """``out[i]``: the row of ``points`` nearest to ``queries[i]``, as ``np.argmin`` of
    ``np.linalg.norm(q - points, axis=1)`` picks it: the distance ``sqrt((d0^2 + d1^2) +
    d2^2)``, the first of equal distances, the first NaN if any."""
    for i in range(queries.shape[0]):
        q0, q1, q2 = queries[i, 0], queries[i, 1], queries[i, 2]
        best = np.inf
        row = 0
        for j in range(points.shape[0]):
            d0 = q0 - points[j, 0]
            d1 = q1 - points[j, 1]
            d2 = q2 - points[j, 2]
            distance = np.sqrt((d0 * d0 + d1 * d1) + d2 * d2)
            if distance != distance:
                row = j
                break
            if distance < best:
                best = distance
                row = j
        out[i] = row


@_compiled
def nms_keep(translation: np.ndarray, rotation: np.ndarray, translation_thresh: float,
             rotation_thresh: float, keep: np.ndarray) -> None:
    """grasp_nms's greedy loop over rows sorted best first: ``keep[i]`` unless a kept, better
    row is closer than both thresholds. Its arithmetic: the distance ``sqrt((dx^2 + dy^2) +
    dz^2)``, the trace of R1 R2^T as ``(dot0 + dot1) + dot2`` of the rows' dot products
    ``(a0 b0 + a1 b1) + a2 b2``, clipped to [-1, 3], the angle ``acos((trace - 1) / 2)``; the
    angle only where the translations are close."""
    kept = np.empty(translation.shape[0], np.int64)
    count = 0
    for i in range(translation.shape[0]):
        b = rotation[i]
        free = True
        for m in range(count):
            j = kept[m]
            dx = translation[j, 0] - translation[i, 0]
            dy = translation[j, 1] - translation[i, 1]
            dz = translation[j, 2] - translation[i, 2]
            if not np.sqrt((dx * dx + dy * dy) + dz * dz) < translation_thresh:
                continue
            a = rotation[j]
            dot0 = (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2]
            dot1 = (a[3] * b[3] + a[4] * b[4]) + a[5] * b[5]
            dot2 = (a[6] * b[6] + a[7] * b[7]) + a[8] * b[8]
            trace = (dot0 + dot1) + dot2
            if trace < -1.0:
                trace = -1.0
            elif trace > 3.0:
                trace = 3.0
            if np.arccos(0.5 * (trace - 1.0)) < rotation_thresh:
                free = False
                break
        keep[i] = free
        if free:
            kept[count] = i
            count += 1
