"""Two-contact force closure: dexnet's ``PointGraspMetrics3D.force_closure`` (Nguyen's test).

graspnetAPI's configuration (quasi-static, soft fingers, 8 cone faces) reaches this antipodal
test for every two-contact grasp: each contact's inward normal must lie within arctan(mu) of the
line to the other contact (direction-agnostic, ``use_abs_value=True``). graspnetAPI then tries
mu = 1.2, 1.0, ..., 0.2 and keeps the smallest passing value; the test is monotone in mu, so
that is the smallest coefficient in the list whose cone holds both contacts' angles.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .portable import dot, norm

GRASPNET_FRICTION_COEFFICIENTS = (1.2, 1.0, 0.8, 0.6, 0.4, 0.2)


def antipodal_angles(c1: np.ndarray, n1: np.ndarray, c2: np.ndarray,
                     n2: np.ndarray) -> np.ndarray:
    """Per grasp, the larger angle between a contact's normal line and the contact line.

    c1, c2: (K, 3) contact points; n1, n2: (K, 3) surface normals (either orientation).
    NaN where the two points coincide or an input is NaN (no force closure).
    dexnet's ``arccos`` of a cosine rounded above 1 is NaN there, which passes; this returns 0.
    """
    c1, n1, c2, n2 = (np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in (c1, n1, c2, n2))
    angles = []
    for normal, point, other in ((-n1, c1, c2), (-n2, c2, c1)):
        diff = other - point
        proj = np.abs(np.einsum('ij,ij->i', normal, diff)) / np.linalg.norm(normal, axis=1)
        with np.errstate(invalid='ignore', divide='ignore'):
            cosine = proj / np.linalg.norm(diff, axis=1)
        angles.append(np.where(cosine > 1, 0.0, np.arccos(np.minimum(cosine, 1.0))))
    same = np.all(c1 == c2, axis=1)
    alpha = np.maximum(angles[0], angles[1])
    bad = same | np.isnan(angles[0]) | np.isnan(angles[1])
    return np.where(bad, np.nan, alpha)


def force_closure(c1, n1, c2, n2, friction_coef: float) -> np.ndarray:
    """(K,) bool: the two contacts are in force closure at ``friction_coef``."""
    alpha = antipodal_angles(c1, n1, c2, n2)
    with np.errstate(invalid='ignore'):
        return ~np.isnan(alpha) & ~(alpha > np.arctan(friction_coef))


def force_closure_min_friction(c1, n1, c2, n2,
                               coefficients: Sequence[float] = GRASPNET_FRICTION_COEFFICIENTS
                               ) -> np.ndarray:
    """(K,) smallest coefficient of ``coefficients`` giving force closure, -1 if none does.

    This is graspnetAPI's ``get_grasp_score`` on found contacts: it walks the list from the
    largest coefficient down and stops at the first failure.
    """
    alpha = antipodal_angles(c1, n1, c2, n2)
    with np.errstate(invalid='ignore'):
        return _walk_down(coefficients, ~np.isnan(alpha), lambda mu: ~(alpha > np.arctan(mu)))


def portable_min_friction(c1, n1, c2, n2,
                          coefficients: Sequence[float] = GRASPNET_FRICTION_COEFFICIENTS
                          ) -> np.ndarray:
    """:func:`force_closure_min_friction` with the same verdicts on every CPU (the synthetic
    labels use it): no arccos or arctan, whose bits depend on the machine's libm or SIMD code,
    and no BLAS (:mod:`.portable`). An angle within arctan(mu) of the contact line is a cosine
    of at least cos(arctan mu) = 1 / sqrt(1 + mu^2); the verdicts differ from the angles' only
    where a cosine lies within rounding of that bound."""
    c1, n1, c2, n2 = (np.asarray(a, dtype=np.float64).reshape(-1, 3) for a in (c1, n1, c2, n2))
    cosines = []
    for normal, point, other in ((-n1, c1, c2), (-n2, c2, c1)):
        diff = other - point
        with np.errstate(invalid='ignore', divide='ignore'):
            cosines.append(np.abs(dot(normal, diff)) / norm(normal) / norm(diff))
    worst = np.minimum(*cosines)
    valid = ~(np.all(c1 == c2, axis=1) | np.isnan(worst))
    with np.errstate(invalid='ignore'):
        return _walk_down(coefficients, valid, lambda mu: worst >= 1 / np.sqrt(1 + mu * mu))


def _walk_down(coefficients: Sequence[float], valid: np.ndarray, holds) -> np.ndarray:
    """From the largest coefficient down, the last one for which ``holds(mu)`` stays True
    (-1 where it fails at the largest or ``valid`` is False)."""
    score = np.full(len(valid), -1.0)
    alive = valid.copy()
    for mu in np.sort(np.asarray(coefficients, dtype=np.float64))[::-1]:
        alive &= holds(mu)
        score[alive] = round(float(mu), 2)
    return score
