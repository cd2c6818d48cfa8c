"""close_jaws (vectorised) against a plain per-grasp port of dexnet's loops.

The reference below follows dexnet's ``find_contact`` / ``find_zero_crossing_quadratic`` /
``surface_normal`` statement by statement on one point at a time, so a slip in the vectorised
bookkeeping (which samples a case fits, the veto, the root choice, the normal's orientation)
shows up as a different contact.
"""
import numpy as np
import pytest

from mmgrasp.geometry import SignedDistanceField, close_jaws


def ref_value(sdf, c):
    return float(sdf(np.asarray(c, float)[None])[0])


def ref_zero_crossing(x1, y1, x2, y2, x3, y3, eps=1.0):
    v = x2 - x1
    v = v / np.linalg.norm(v)
    t2 = ((x2 - x1)[v != 0] / v[v != 0])[0]
    t3 = ((x3 - x1)[v != 0] / v[v != 0])[0]
    X = np.array([[0.0, 0.0, 1.0], [t2 ** 2, t2, 1], [t3 ** 2, t3, 1]])
    try:
        w = np.linalg.solve(X, np.array([y1, y2, y3]))
    except np.linalg.LinAlgError:
        return None
    t_zc = None
    for r in np.roots(w):
        if not np.iscomplex(r) and 0 <= r.real <= 10:
            t_zc = r.real
    if np.abs(w[0]) < 1e-10:
        return None
    if t_zc is None:
        t_zc = -w[1] / (2 * w[0])
    if t_zc < -eps or t_zc > eps:
        return None
    return x1 + t_zc * v


def ref_normal(sdf, coords, delta=1.5):
    if abs(ref_value(sdf, coords)) >= sdf.surface_thresh:
        return None
    X = []
    for dx in (-delta, 0.0, delta):
        for dy in (-delta, 0.0, delta):
            for dz in (-delta, 0.0, delta):
                d = np.array([dx, dy, dz])
                if dx != 0 or dy != 0 or dz != 0:
                    d = delta * d / np.linalg.norm(d)
                p = coords + d
                val = ref_value(sdf, p)
                if abs(val) < sdf.surface_thresh:
                    X.append([p[0], p[1], p[2], val])
    X.sort(key=lambda x: x[3])
    X = np.array(X)[:, :3]
    U, _, _ = np.linalg.svd((X - X.mean(axis=0)).T)
    n = U[:, 2]
    if ref_value(sdf, coords + n * 0.01) < ref_value(sdf, coords):
        n = -n
    return n


def ref_find_contact(sdf, line):
    found, zc = False, None
    vals = [ref_value(sdf, p) for p in line]
    i = 0
    while i < len(line) and not found:
        if abs(vals[i]) < sdf.surface_thresh:
            found = True
            if i == 0:
                zc = ref_zero_crossing(line[0], vals[0], line[1], vals[1], line[2], vals[2])
                if zc is None or abs(vals[1]) < abs(vals[0]):
                    found = False
            elif i == len(line) - 1:
                zc = ref_zero_crossing(line[i - 2], vals[i - 2], line[i - 1], vals[i - 1],
                                       line[i], vals[i])
                found = zc is not None
            else:
                zc = ref_zero_crossing(line[i - 1], vals[i - 1], line[i], vals[i], line[i + 1],
                                       vals[i + 1])
                if zc is None or abs(vals[i + 1]) < abs(vals[i]):
                    found = False
        i += 1
    if not found:
        return None, None
    point = sdf.to_object(zc)
    in_dir = line[-1] - line[0]
    in_dir = (in_dir / np.linalg.norm(in_dir)).astype(np.float32).astype(np.float64)
    n = ref_normal(sdf, sdf.to_grid(point))
    if n is None:
        return None, None
    if np.dot(in_dir, n) > 0:
        n = -n
    return point, n.astype(np.float32).astype(np.float64)


def ref_close_jaws(sdf, centre, axis, width):
    n = max(int(2 * (width * (1.0 / sdf.resolution)) / 2), 3)
    out = []
    for start, direction in ((centre - width / 2 * axis, axis), (centre + width / 2 * axis, -axis)):
        line = sdf.to_grid(np.array([start + t * direction for t in np.linspace(0, width / 2, n)]))
        out.append(ref_find_contact(sdf, line))
    return out


def rounded_box(grid):
    # superellipsoid-like, curved everywhere so the quadratic fit works
    q = (np.abs(grid) / np.array([0.03, 0.02, 0.025])) ** 4
    return (q.sum(-1) ** 0.25 - 1.0) * 0.025


def small_sphere(grid):
    # 4 cells of radius and quadratic along every line: both roots of the fit lie within
    # 10 cells, so which root dexnet keeps (the last of np.roots) decides the contact
    return (np.sum(grid ** 2, -1) - 0.012 ** 2) / (2 * 0.012)


@pytest.mark.parametrize('shape, spread', [(rounded_box, 0.02), (small_sphere, 0.008)])
def test_close_jaws_matches_the_per_grasp_port(shape, spread):
    res, n = 0.003, 41
    origin = np.full(3, -(n - 1) / 2 * res)
    grid = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing='ij'), -1) * res + origin
    sdf = SignedDistanceField(shape(grid), origin, res)
    rng = np.random.default_rng(0)
    k = 25
    centres = rng.uniform(-spread, spread, (k, 3))
    axes = rng.normal(size=(k, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    widths = rng.uniform(0.02, 0.1, k)
    found, pts, normals = close_jaws(sdf, centres, axes, widths)
    n_found = 0
    for g in range(k):
        ref = ref_close_jaws(sdf, centres[g], axes[g], widths[g])
        ref_found = all(p is not None for p, _ in ref)
        assert found[g] == ref_found, g
        if ref_found:
            n_found += 1
            for jaw in range(2):
                np.testing.assert_allclose(pts[g, jaw], ref[jaw][0], atol=1e-12)
                np.testing.assert_allclose(normals[g, jaw], ref[jaw][1], atol=1e-6)
    assert 3 < n_found < k  # both outcomes exercised
