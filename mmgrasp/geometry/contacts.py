"""Closing parallel jaws on a signed distance field: dexnet's ``close_fingers``, vectorised.

Each jaw starts at its open position ``centre -/+ width/2 * axis`` and moves towards the centre
(not further) along the line of action, sampled at ``max(int(width / resolution), 3)`` points.
The first sample within the surface band whose quadratic zero-crossing estimate is accepted
gives the contact (dexnet's ``find_contact`` rules, including its asymmetric first/last-sample
cases); the normal there comes from the SDF's plane fit and faces against the jaw's motion.
"""
from __future__ import annotations

import numpy as np

from .sdf import SignedDistanceField, SignedDistanceFields


def _quadratic_zero_crossing(x1, y1, x2, y2, x3, y3, eps: float = 1.0):
    """dexnet's ``find_zero_crossing_quadratic`` for K triples at once: (points (K,3), ok (K,))."""
    k = len(x1)
    v = x2 - x1
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    nonzero = v != 0
    first = np.argmax(nonzero, axis=1)
    rows = np.arange(k)
    has_axis = nonzero[rows, first]
    vf = np.where(has_axis, v[rows, first], 1.0)
    t2 = (x2 - x1)[rows, first] / vf
    t3 = (x3 - x1)[rows, first] / vf
    ones = np.ones(k)
    mats = np.stack([np.stack([np.zeros(k), np.zeros(k), ones], 1),
                     np.stack([t2 * t2, t2, ones], 1),
                     np.stack([t3 * t3, t3, ones], 1)], 1)
    ok = has_axis & (np.abs(np.linalg.det(mats)) > 0)
    w = np.zeros((k, 3))
    if ok.any():
        w[ok] = np.linalg.solve(mats[ok], np.stack([y1, y2, y3], 1)[ok][..., None])[..., 0]
    # np.roots(w): eigenvalues of the companion matrix, in LAPACK's order (dexnet keeps the
    # last admissible root); a zero constant term adds a root 0 at the end.
    ok &= np.isfinite(w).all(axis=1)
    a, b, c = w[:, 0], w[:, 1], w[:, 2]
    quad = ok & (a != 0)
    roots = np.full((k, 2), np.nan + 0j)
    lead = quad & (c != 0)
    if lead.any():
        comp = np.zeros((int(lead.sum()), 2, 2))
        comp[:, 0, 0] = -b[lead] / a[lead]
        comp[:, 0, 1] = -c[lead] / a[lead]
        comp[:, 1, 0] = 1.0
        roots[lead] = np.linalg.eigvals(comp)
    tail = quad & (c == 0)
    roots[tail, 0] = -b[tail] / a[tail]
    roots[tail, 1] = 0.0
    real = np.isfinite(roots.real) & (roots.imag == 0)
    admissible = real & (roots.real >= 0) & (roots.real <= 10)
    last = np.where(admissible[:, 1], 1, 0)
    any_root = admissible.any(axis=1)
    t_zc = np.where(any_root, roots.real[rows, last], 0.0)
    big = np.abs(a) >= 1e-10
    vertex = -b / np.where(a != 0, 2 * a, 1.0)
    t_zc = np.where(any_root, t_zc, vertex)
    ok &= big & (t_zc >= -eps) & (t_zc <= eps)
    return x1 + t_zc[:, None] * v, ok


def _find_contacts(sdf: SignedDistanceFields, field: np.ndarray, lines: np.ndarray,
                   counts: np.ndarray):
    """First accepted surface crossing along each line of action (grid coordinates).

    field: (K,) each line's field; lines: (K, S, 3) padded; counts: (K,) samples used per line
    (>= 3). Returns (found (K,), zero crossing in grid coordinates (K, 3)).
    """
    k, s, _ = lines.shape
    idx = np.arange(s)
    used = idx[None, :] < counts[:, None]
    values = np.zeros((k, s))
    rows_field = np.broadcast_to(field[:, None], (k, s))
    values[used] = sdf(lines[used], rows_field[used])
    on = used & (np.abs(values) < sdf.surface_thresh[field][:, None])
    rows = np.repeat(np.arange(k), s).reshape(k, s)
    col = np.broadcast_to(idx, (k, s))
    last = col == (counts[:, None] - 1)
    first = col == 0
    # the three samples each case fits, and the "next value is smaller" veto
    i0 = np.where(first, 0, np.where(last, col - 2, col - 1))
    i0 = np.clip(i0, 0, s - 1)
    i1 = np.clip(np.where(first, 1, np.where(last, col - 1, col)), 0, s - 1)
    i2 = np.clip(np.where(first, 2, np.where(last, col, col + 1)), 0, s - 1)
    cand = on
    pts = np.zeros((k, s, 3))
    accepted = np.zeros((k, s), dtype=bool)
    if cand.any():
        r, c = rows[cand], col[cand]
        a0, a1, a2 = i0[cand], i1[cand], i2[cand]
        zc, ok = _quadratic_zero_crossing(lines[r, a0], values[r, a0], lines[r, a1],
                                          values[r, a1], lines[r, a2], values[r, a2])
        after = np.clip(c + 1, 0, s - 1)
        veto = ~last[cand] & (np.abs(values[r, after]) < np.abs(values[r, c]))
        accepted[r, c] = ok & ~veto
        pts[r, c] = zc
    found = accepted.any(axis=1)
    at = np.argmax(accepted, axis=1)
    return found, pts[np.arange(k), at]


def close_jaws(sdf: SignedDistanceField | SignedDistanceFields, centers: np.ndarray,
               axes: np.ndarray, widths: np.ndarray, samples_per_grid: int = 2,
               field: np.ndarray | None = None):
    """Close parallel jaws on ``sdf``: dexnet's ``ParallelJawPtGrasp3D.close_fingers``.

    Args:
        sdf: one field, or several (:class:`SignedDistanceFields`) with ``field`` (K,) naming
            each grasp's: the grasps of many objects (and frames) closed in one pass, each
            as on its own field alone.
        centers: (K, 3) jaw centres in the object frame.
        axes: (K, 3) unit jaw axes (from jaw 1 towards jaw 2).
        widths: (K,) opening widths in metres.

    Returns:
        found (K,) both contacts found with normals; points (K, 2, 3) and outward normals
        (K, 2, 3) in the object frame (NaN where not found).
    """
    centers = np.asarray(centers, dtype=np.float64).reshape(-1, 3)
    axes = np.asarray(axes, dtype=np.float64).reshape(-1, 3)
    widths = np.asarray(widths, dtype=np.float64).reshape(-1)
    k = len(centers)
    if isinstance(sdf, SignedDistanceField):
        sdf, field = SignedDistanceFields([sdf]), None
    field = np.zeros(k, np.int64) if field is None else \
        np.asarray(field, dtype=np.int64).reshape(k)
    points = np.full((k, 2, 3), np.nan)
    normals = np.full((k, 2, 3), np.nan)
    if k == 0:
        return np.zeros(0, dtype=bool), points, normals
    width_grid = widths * (1.0 / sdf.resolution[field])
    counts = np.maximum((samples_per_grid * width_grid / 2).astype(np.int64), 3)
    s = int(counts.max())
    # np.linspace(0, width/2, n): i * step, the last sample exactly width/2
    half = widths / 2 - 0.0 / 2
    step = half / (counts - 1)
    t = np.arange(s)[None, :] * step[:, None]
    t[np.arange(k), counts - 1] = half
    found_all = np.ones(k, dtype=bool)
    for jaw, sign in ((0, -1.0), (1, 1.0)):
        start = centers + sign * (widths / 2.0)[:, None] * axes
        direction = -sign * axes
        lines_obj = start[:, None, :] + t[..., None] * direction[:, None, :]
        lines = sdf.to_grid(lines_obj, field[:, None])
        found, zc = _find_contacts(sdf, field, lines, counts)
        point = sdf.to_object(zc, field)
        in_dir = lines[np.arange(k), counts - 1] - lines[:, 0]
        in_dir = in_dir / np.linalg.norm(in_dir, axis=1, keepdims=True)
        in_dir = in_dir.astype(np.float32).astype(np.float64)
        as_grid = sdf.to_grid(point, field)
        normal, valid = sdf.surface_normal(np.where(found[:, None], as_grid, 0.0), field)
        flip = np.einsum('ij,ij->i', in_dir, normal) > 0
        normal[flip] = -normal[flip]
        normal = normal.astype(np.float32).astype(np.float64)
        found &= valid
        points[found, jaw] = point[found]
        normals[found, jaw] = normal[found]
        found_all &= found
    return found_all, points, normals
