"""The compiled loops of mmgrasp.geometry.compiled against the array rules they replace:
the gripper test (``jaw_contacts``, behind gripper_contacts) against graspnetAPI's collision
rule as masks over every grasp-point pair, the gripper coordinates summed in the same order;
the nearest point (``nearest_rows``, behind nearest_indices) against numpy's argmin of
``np.linalg.norm``; grasp NMS (``nms_keep``, behind grasp_nms) against grasp_nms's C++ loop in
Python floats; and mutants of each loop that the comparisons catch."""
import inspect
import math
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mmgrasp.geometry import grasp_nms, gripper_collision, gripper_contacts, nearest_indices
from mmgrasp.geometry import compiled


def test_numba_is_imported_on_first_use_only():
    """numba costs ~0.2 s to import and more to load the compiled code: only a process that
    tests a collision pays it, not every tool that imports mmgrasp."""
    code = ('import sys, numpy as np, mmgrasp.geometry, mmgrasp.evaluation.graspnet_dump_eval; '
            'print("numba" in sys.modules); '
            'mmgrasp.geometry.gripper_contacts(np.zeros((1, 17)), np.zeros((1, 3))); '
            'print("numba" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.split() == ['False', 'True'], out.stdout


def test_no_writable_cache_folder_compiles_in_memory():
    """Where numba finds no folder to cache in (a read-only install without a user cache;
    simulated by allowing only the locator for zipped packages), the loops still compile and
    give their results instead of failing the import."""
    code = ('import numpy as np; from mmgrasp.geometry import gripper_contacts, grasp_nms, '
            'nearest_indices; g = np.zeros((2, 17)); g[:, 4:13] = np.eye(3).ravel(); '
            'g[1, 13] = 1.0; '
            'print(gripper_contacts(g, np.zeros((1, 3)))[1].tolist(), len(grasp_nms(g)), '
            'nearest_indices(np.ones((1, 3)), np.zeros((2, 3))).tolist())')
    env = dict(os.environ, NUMBA_CACHE_LOCATOR_CLASSES='ZipCacheLocator')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split('\n')[0] == '[True, True] 2 [0]', out.stdout


def contacts_every_pair(grasps, points, height=0.02, depth_base=0.02, finger_width=0.01,
                        empty_thresh=10):
    """(hit, empty): every region's mask over every point, x y z as ((d0 r0j + d1 r1j) + d2 r2j)."""
    rot = grasps[:, 4:13].reshape(-1, 3, 3)
    d = [points[None, :, k] - grasps[:, None, 13 + k] for k in range(3)]
    x, y, z = ((d[0] * rot[:, 0, j, None] + d[1] * rot[:, 1, j, None]) + d[2] * rot[:, 2, j, None]
               for j in range(3))
    depths, half = grasps[:, 3][:, None], grasps[:, 1][:, None] / 2
    m1 = (z > -height / 2) & (z < height / 2)
    m2 = (x > -depth_base) & (x < depths)
    m3, m4 = y > -(half + finger_width), y < -half
    m5, m6 = y < (half + finger_width), y > half
    m7 = (x > -(depth_base + finger_width)) & (x < -depth_base)
    hit = (m1 & m2 & m3 & m4) | (m1 & m2 & m5 & m6) | (m1 & m3 & m5 & m7)
    return hit.any(axis=-1), (m1 & m2 & ~m4 & ~m6).sum(axis=-1) < empty_thresh


def scene(seed: int, n: int = 120):
    """Grasps with points around their jaws (between them, on the fingers and the palm, just
    outside), so that free, empty and colliding grasps all occur, and a box that cuts some."""
    rs = np.random.RandomState(seed)
    grasps = np.zeros((n, 17))
    grasps[:, 1] = 0.01 + rs.rand(n) * 0.09
    grasps[:, 3] = rs.choice([0.01, 0.02, 0.03, 0.04], n)
    rot = Rotation.random(n, random_state=seed).as_matrix()
    grasps[:, 4:13] = rot.reshape(n, 9)
    grasps[:, 13:16] = rs.rand(n, 3) * 0.3
    clouds = []
    for i in range(n):
        width, depth = grasps[i, 1], grasps[i, 3]
        count = rs.randint(3, 40)
        lo = np.array([-0.035, -width / 2 - 0.015, -0.012])
        hi = np.array([depth + 0.01, width / 2 + 0.015, 0.012])
        if i % 2:  # only between the jaws
            lo, hi = np.array([0.0, -width / 2, -0.009]), np.array([depth, width / 2, 0.009])
        local = lo + rs.rand(count, 3) * (hi - lo)
        clouds.append(local @ rot[i].T + grasps[i, 13:16])
    points = np.concatenate(clouds)
    return grasps, points, (np.full(3, 0.02), np.full(3, 0.28))


@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('empty_thresh', [0, 10])
def test_compiled_contacts_equal_every_pair(seed, empty_thresh):
    grasps, points, (lo, hi) = scene(seed)
    hit, empty = gripper_contacts(grasps, points, empty_thresh=empty_thresh)
    expected = contacts_every_pair(grasps, points, empty_thresh=empty_thresh)
    np.testing.assert_array_equal(hit, expected[0])
    np.testing.assert_array_equal(empty, expected[1])
    if empty_thresh:  # every outcome occurs
        assert (~hit & ~empty).sum() > 5 and (hit & ~empty).sum() > 5 and empty.sum() > 5
    # the box: the same verdicts as the points cut out of it first
    inside = np.all((points > lo) & (points < hi), axis=1)
    assert 0 < inside.sum() < len(points)
    within = gripper_contacts(grasps, points, empty_thresh=empty_thresh, within=(lo, hi))
    expected = contacts_every_pair(grasps, points[inside], empty_thresh=empty_thresh)
    np.testing.assert_array_equal(within[0], expected[0])
    np.testing.assert_array_equal(within[1], expected[1])


def test_gripper_collision_equals_every_mask_over_every_point():
    rs = np.random.RandomState(1)
    n = 150
    grasps = np.zeros((n, 17))
    grasps[:, 1] = 0.02 + rs.rand(n) * 0.08
    grasps[:, 3] = rs.choice([0.01, 0.02, 0.03, 0.04], n)
    rotations = Rotation.random(n, random_state=2).as_matrix()
    grasps[:, 4:13] = rotations.reshape(n, 9)
    grasps[:, 13:16] = np.arange(n)[:, None] * 0.3  # far apart: each grasp sees its own points
    clusters = []
    for i, (_, width, _, depth) in enumerate(grasps[:, :4]):
        if i % 3:  # between the jaws only, 5 to 19 points: free or empty
            lo, hi, count = [0.0, -width / 2, -0.01], [depth, width / 2, 0.01], rs.randint(5, 20)
        else:  # around the whole gripper and its edges: collisions
            lo, hi, count = [-0.035, -width / 2 - 0.015, -0.012], [depth + 0.01, width / 2 + 0.015,
                                                                    0.012], 60
        local = lo + rs.rand(count, 3) * (np.array(hi) - lo)
        if i % 3 == 2:  # and a few just outside the fingers, which touch nothing
            side = rs.choice([-1.0, 1.0], 4)
            beyond = width / 2 + 0.0105 + rs.rand(4) * 0.004
            outside = np.stack([rs.rand(4) * depth, side * beyond, np.zeros(4)], 1)
            local = np.concatenate([local, outside])
        clusters.append(local @ rotations[i].T + grasps[i, 13:16])
    points = np.concatenate(clusters)
    collision, empty = gripper_collision(grasps, points)
    expected_hit, expected_empty = contacts_every_pair(grasps, points)
    expected_collision = expected_hit | expected_empty
    np.testing.assert_array_equal(empty, expected_empty)
    np.testing.assert_array_equal(collision, expected_collision)
    # every outcome occurs: free, empty, and colliding with points between the jaws
    assert (~collision).sum() > 10 and empty.sum() > 10 and (collision & ~empty).sum() > 10


def test_other_gripper_dimensions_reach_the_loop():
    grasps, points, _ = scene(3)
    wide = dict(height=0.03, depth_base=0.03, finger_width=0.02, empty_thresh=5)
    got = gripper_contacts(grasps, points, **wide)
    expected = contacts_every_pair(grasps, points, **wide)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    assert not np.array_equal(got[0], gripper_contacts(grasps, points)[0])


def test_nothing_to_test():
    hit, empty = gripper_contacts(np.zeros((0, 17)), np.zeros((5, 3)))
    assert hit.shape == empty.shape == (0,)
    grasps, _, _ = scene(4, n=3)
    hit, empty = gripper_contacts(grasps, np.zeros((0, 3)))
    assert not hit.any() and empty.all()


def _mutant(name: str, old: str, new: str):
    source = textwrap.dedent(inspect.getsource(getattr(compiled, name).py_func))
    assert old in source
    namespace = {'np': np}
    exec(source.replace(old, new).split('\n', 1)[1], namespace)  # without the decorator
    return numba.njit(namespace[name])


@pytest.mark.parametrize('old,new', [
    # R instead of its transpose for the height axis
    ('z = (d0 * r[0, 2] + d1 * r[1, 2]) + d2 * r[2, 2]',
     'z = (d0 * r[2, 0] + d1 * r[2, 1]) + d2 * r[2, 2]'),
    # stopping at the first contact, before the points between the jaws are counted
    ('if touched and between >= empty_thresh:', 'if touched:'),
    # the palm as wide as the gap between the fingers only
    ('or (beyond_left and beyond_right and palm)',
     'or (not inner_left and not inner_right and palm)'),
])
def test_the_comparison_catches_a_mutated_loop(monkeypatch, old, new):
    monkeypatch.setattr(compiled, 'jaw_contacts', _mutant('jaw_contacts', old, new))
    grasps, points, _ = scene(0)
    hit, empty = gripper_contacts(grasps, points)
    expected = contacts_every_pair(grasps, points)
    assert not (np.array_equal(hit, expected[0]) and np.array_equal(empty, expected[1]))


def nearest_by_numpy(queries, points):
    return np.argmin(np.linalg.norm(queries[:, None, :] - points[None, :, :], axis=-1), axis=-1)


def tied_points(seed: int):
    """Coordinates on a 5 cm grid: many queries are equally far from several points."""
    rs = np.random.RandomState(seed)
    grid = np.linspace(-0.3, 0.3, 13)
    return grid[rs.randint(13, size=(300, 3))], grid[rs.randint(13, size=(500, 3))]


def near_ties(seed: int):
    """Each query between two points at the same distance in exact arithmetic (the offset's
    components permuted): which one is nearer depends on how the squares are summed."""
    rs = np.random.RandomState(seed)
    queries = np.arange(300)[:, None] * np.array([1.0, 0.5, 0.25]) + rs.rand(300, 3)
    offsets = rs.uniform(-0.01, 0.01, (300, 3))
    points = np.concatenate([queries + offsets, queries + np.roll(offsets, 1, axis=1)])
    return queries, points


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_nearest_equals_numpy_argmin_with_ties(seed):
    queries, points = near_ties(seed)
    np.testing.assert_array_equal(nearest_indices(queries, points),
                                  nearest_by_numpy(queries, points))
    queries, points = tied_points(seed)
    expected = nearest_by_numpy(queries, points)
    d = np.linalg.norm(queries[:, None, :] - points[None, :, :], axis=-1)
    assert ((d == d.min(axis=1, keepdims=True)).sum(axis=1) > 1).sum() > 5  # ties occur
    np.testing.assert_array_equal(nearest_indices(queries, points), expected)
    np.testing.assert_array_equal(nearest_indices(queries.astype(np.float32), points),
                                  nearest_by_numpy(queries.astype(np.float32).astype(np.float64),
                                                   points))


def test_nearest_nan_and_empty_as_numpy():
    queries, points = tied_points(3)
    queries[5, 1] = np.nan
    points[7, 0] = np.nan
    np.testing.assert_array_equal(nearest_indices(queries, points),
                                  nearest_by_numpy(queries, points))
    assert nearest_indices(np.zeros((0, 3)), points).shape == (0,)
    with pytest.raises(ValueError, match='no points'):
        nearest_indices(queries, np.zeros((0, 3)))


@pytest.mark.parametrize('old,new', [
    ('if distance < best:', 'if distance <= best:'),  # the last of equal distances
    ('np.sqrt((d0 * d0 + d1 * d1) + d2 * d2)', 'np.sqrt(d0 * d0 + (d1 * d1 + d2 * d2))'),
])
def test_the_comparison_catches_a_mutated_nearest(monkeypatch, old, new):
    monkeypatch.setattr(compiled, 'nearest_rows', _mutant('nearest_rows', old, new))
    mismatches = 0
    for data in (tied_points, near_ties):
        queries, points = data(0)
        mismatches += int(not np.array_equal(nearest_indices(queries, points),
                                             nearest_by_numpy(queries, points)))
    assert mismatches


def nms_pairwise(grasps: np.ndarray, translation_thresh=0.03, rotation_thresh=math.pi / 6):
    """grasp_nms's C++ loop in Python floats: every candidate against every kept grasp."""
    order = sorted(range(len(grasps)), key=lambda i: -grasps[i, 0])  # distinct scores
    kept = []
    for i in order:
        b = [float(v) for v in grasps[i]]
        for j in kept:
            a = [float(v) for v in grasps[j]]
            square = 0.0
            for k in range(13, 16):
                square += (a[k] - b[k]) ** 2
            trace = 0.0
            for row in range(3):
                dot = 0.0
                for k in range(3):
                    dot += a[4 + 3 * row + k] * b[4 + 3 * row + k]
                trace += dot
            trace = min(3.0, max(-1.0, trace))
            if math.sqrt(square) < translation_thresh and \
                    math.acos(0.5 * (trace - 1.0)) < rotation_thresh:
                break
        else:
            kept.append(i)
    return grasps[kept]


def lattice_grasps(n, spread, turn):
    rs = np.random.RandomState(n)
    grasps = np.zeros((n, 17))
    grasps[:, 0] = rs.permutation(n) / n
    rotations = Rotation.random(random_state=n) * Rotation.from_rotvec(rs.randn(n, 3) * turn)
    grasps[:, 4:13] = rotations.as_matrix().reshape(n, 9)
    # translations on a 1 cm lattice: many pairs exactly 0.03 apart, on the threshold
    grasps[:, 13:16] = np.round(rs.rand(n, 3) * spread, 2)
    return grasps


@pytest.mark.parametrize('n,spread,turn', [(5, 0.05, 0.3), (100, 0.06, 0.4), (300, 0.1, 0.5),
                                           (90, 0.03, 0.1)])
def test_nms_equals_the_pairwise_rule(n, spread, turn):
    grasps = lattice_grasps(n, spread, turn)
    kept = grasp_nms(grasps)
    assert 0 < len(kept) < n or n == 5
    np.testing.assert_array_equal(kept, nms_pairwise(grasps))


@pytest.mark.parametrize('old,new', [
    ('< translation_thresh:', '<= translation_thresh:'),  # pairs on the threshold suppressed
    # the trace of R1 R2 instead of R1 R2^T
    ('dot0 = (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2]',
     'dot0 = (a[0] * b[0] + a[1] * b[3]) + a[2] * b[6]'),
    ('kept[count] = i', 'kept[count] = max(i - 1, 0)'),  # compared with the wrong kept row
])
def test_the_comparison_catches_a_mutated_nms(monkeypatch, old, new):
    monkeypatch.setattr(compiled, 'nms_keep', _mutant('nms_keep', old, new))
    assert any(not np.array_equal(grasp_nms(g), nms_pairwise(g))
               for g in (lattice_grasps(300, 0.1, 0.5), lattice_grasps(90, 0.03, 0.1)))
