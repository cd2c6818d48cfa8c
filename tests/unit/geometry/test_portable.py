"""mmgrasp.geometry.portable: the fixed operation order each function documents (checked bit for
bit against Python floats, whose every operation is one IEEE rounding), values within rounding
of numpy's, and sine / cosine within a few units in the last place of libm's."""
import math

import numpy as np
import pytest

from mmgrasp.geometry import force_closure_min_friction, portable_min_friction
from mmgrasp.geometry import portable


def _python_matmul(a, b):
    """Row-by-column sums k = 0, 1, ... in Python floats."""
    out = np.empty((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = float(a[i, 0]) * float(b[0, j])
            for k in range(1, a.shape[1]):
                acc = acc + float(a[i, k]) * float(b[k, j])
            out[i, j] = acc
    return out


def _bits(x):
    return np.asarray(x, np.float64).view(np.uint64)


def test_products_sum_in_index_order():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(4, 3))
    expected = _python_matmul(a, b)
    np.testing.assert_array_equal(_bits(portable.matmul(a, b)), _bits(expected))
    stack = np.stack([a, 2 * a])
    np.testing.assert_array_equal(_bits(portable.matmul(stack, b)[1]),
                                  _bits(_python_matmul(2 * a, b)))
    v = rng.normal(size=4)
    np.testing.assert_array_equal(_bits(portable.matvec(a, v)),
                                  _bits(_python_matmul(a, v[:, None])[:, 0]))
    np.testing.assert_array_equal(_bits(portable.dot(a, v)),
                                  _bits(_python_matmul(a, v[:, None])[:, 0]))
    np.testing.assert_allclose(portable.matmul(a, b), a @ b, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(portable.norm(np.array([[3.0, 4.0], [0.0, 0.0]])), [5.0, 0.0])


def test_the_sum_order_is_index_order():
    """A sum whose rounding depends on the order: index order gives (1 + 1e-16) - 1 = 0."""
    a, b = np.array([[1.0, 1e-16, -1.0]]), np.ones((3, 1))
    assert portable.matmul(a, b)[0, 0] == 0.0
    assert portable.matvec(a, b[:, 0])[0] == 0.0
    assert portable.dot(a[0], b[:, 0]) == 0.0
    assert portable.dot(a[0, ::-1], b[:, 0]) > 0  # the other order keeps the small term


def test_shape_errors_name_both_shapes():
    with pytest.raises(ValueError, match=r'\(2, 3\) and \(2, 3\)'):
        portable.matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match='matvec'):
        portable.matvec(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match='dot'):
        portable.dot(np.ones(3), np.ones(2))


def _random_pose(rng):
    q = rng.normal(size=4)
    w, x, y, z = q / np.linalg.norm(q)
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = r, rng.uniform(-1, 1, 3)
    return pose


def test_rigid_inverse_and_transform():
    rng = np.random.default_rng(1)
    pose = _random_pose(rng)
    inv = portable.rigid_inverse(pose)
    np.testing.assert_allclose(inv, np.linalg.inv(pose), rtol=0, atol=1e-15)
    np.testing.assert_allclose(portable.matmul(inv, pose), np.eye(4), rtol=0, atol=1e-15)
    assert inv[3].tolist() == [0, 0, 0, 1]
    points = rng.normal(size=(7, 3))
    moved = portable.transform(points, pose)
    np.testing.assert_array_equal(
        _bits(moved), _bits(_python_matmul(points, pose[:3, :3].T) + pose[:3, 3]))
    np.testing.assert_allclose(portable.transform(moved, inv), points, rtol=0, atol=1e-14)


@pytest.mark.parametrize('low, high', [(-4.0, 4.0), (-2e5, 2e5), (-1e-3, 1e-3)])
def test_sin_cos_within_a_few_units_in_the_last_place(low, high):
    x = np.random.default_rng(2).uniform(low, high, 3000)
    for ours, libm in ((portable.sin, math.sin), (portable.cos, math.cos)):
        got = ours(x)
        ref = np.array([libm(v) for v in x])
        # libm is within one unit of the truth, these within two: three units apart at most
        assert np.all(np.abs(got - ref) <= 3 * np.spacing(np.abs(ref))), ours.__name__


def test_sin_cos_exact_points_scalars_and_signs():
    assert portable.sin(0.0) == 0.0 and portable.cos(0.0) == 1.0
    assert isinstance(portable.sin(0.5), np.float64)
    for k in range(-8, 9):  # quadrant bookkeeping: k * pi/2 lands on 0, +-1
        x = k * np.pi / 2
        assert abs(portable.sin(x) - [0, 1, 0, -1][k % 4]) < 1e-15
        assert abs(portable.cos(x) - [1, 0, -1, 0][k % 4]) < 1e-15
    x = np.linspace(-7, 7, 101)
    np.testing.assert_allclose(portable.sin(-x), -portable.sin(x), rtol=0, atol=0)
    np.testing.assert_allclose(portable.sin(x) ** 2 + portable.cos(x) ** 2, 1, rtol=0, atol=4e-16)


def test_sin_cos_refuse_angles_they_cannot_reduce():
    with pytest.raises(ValueError, match='up to'):
        portable.sin(np.array([0.0, 2 * portable.MAX_ANGLE]))
    with pytest.raises(ValueError, match='finite'):
        portable.cos(np.nan)


def test_portable_min_friction_matches_the_angle_test():
    """Same verdicts as the arccos / arctan form on random contacts, coincident points and NaN,
    and the bound sits where the angle form puts it: just inside arctan(mu) holds, just
    outside does not."""
    rng = np.random.default_rng(3)
    c1, c2 = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 3))
    n1, n2 = rng.normal(size=(4000, 3)), rng.normal(size=(4000, 3))
    c2[:5] = c1[:5]
    n1[5] = np.nan
    n1[6:12] = c2[6:12] - c1[6:12]  # antipodal pairs: mu = 0.2 for both
    n2[6:12] = c2[6:12] - c1[6:12]
    expected = force_closure_min_friction(c1, n1, c2, n2)
    got = portable_min_friction(c1, n1, c2, n2)
    np.testing.assert_array_equal(got, expected)
    assert (got[:6] == -1).all() and (got[6:12] == 0.2).all() and len(np.unique(got)) == 7
    mu = 0.4
    for angle, holds in ((math.atan(mu) - 1e-9, True), (math.atan(mu) + 1e-9, False)):
        normal = np.array([[math.cos(angle), math.sin(angle), 0.0]])
        pair = (np.zeros((1, 3)), normal, np.array([[1.0, 0, 0]]), np.array([[1.0, 0, 0]]))
        assert (portable_min_friction(*pair, [mu]) == mu) == holds
        assert (force_closure_min_friction(*pair, [mu]) == mu) == holds
