"""estimate_normals against open3d's estimate_normals (a stored golden), closed-form surfaces,
mutations of the rule, and degenerate clouds."""
import os

import numpy as np
import pytest

from mmgrasp.datasets import point_normals
from mmgrasp.datasets.point_normals import estimate_normals

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), 'data', 'normals_golden', 'golden.npz')
COLLINEAR = slice(-3, None)  # the golden's last three points lie on one line


def angle_up_to_sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Degrees between the lines of unit vectors ``a`` and ``b`` (atan2 of |a × b| and |a · b|:
    arccos of a dot product near 1 turns float32 rounding into 0.02°)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=1),
                                 np.abs((a * b).sum(axis=1))))


@pytest.fixture(scope='module')
def golden():
    with np.load(GOLDEN) as npz:
        assert str(npz['open3d_version']) == '0.20.0'
        return npz['points'], npz['normals']


def agrees_with_open3d(normals: np.ndarray, expected: np.ndarray) -> bool:
    """All but the collinear triple within 1° of open3d's line, and 99.5 % within 1e-4°
    (float32 rounding; open3d's k-d tree breaks ties at the 30th neighbour otherwise)."""
    angle = angle_up_to_sign(normals, expected)[:COLLINEAR.start]
    return bool(angle.max() < 1.0 and np.mean(angle < 1e-4) >= 0.995)


def test_equals_open3d_up_to_sign_and_faces_the_camera(golden):
    points, expected = golden
    normals = estimate_normals(points)
    assert normals.dtype == np.float32 and normals.shape == points.shape
    assert agrees_with_open3d(normals, expected)
    angle = angle_up_to_sign(normals, expected)[:COLLINEAR.start]
    assert np.mean(angle < 1e-4) > 0.999  # one point of 4 003 differs here (a tie, 0.077°)
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-6)
    assert ((normals.astype(np.float64) * points).sum(axis=1) <= 0).all()
    # open3d leaves the sign to its solver: about a fifth of its normals face away here
    assert ((expected * points).sum(axis=1) > 0).mean() > 0.1
    # the isolated points: open3d's (0, 0, 1), here turned towards the camera
    np.testing.assert_array_equal(expected[-6:-3], [[0, 0, 1]] * 3)
    np.testing.assert_array_equal(normals[-6:-3], [[0, 0, -1]] * 3)
    # the collinear triple: both give a unit vector orthogonal to the line (x axis)
    np.testing.assert_allclose(normals[COLLINEAR, 0], 0, atol=1e-6)
    np.testing.assert_allclose(expected[COLLINEAR, 0], 0, atol=1e-6)


def _mutated(centre: bool = True, column: int = 0):
    """pca_normals with one rule changed (no mean-centring, or another eigenvector)."""

    def pca(query, neighbours, valid):
        weight = valid[..., None].astype(np.float64)
        count = np.maximum(valid.sum(axis=1), 1)[:, None]
        mean = (neighbours * weight).sum(axis=1) / count if centre else 0.0
        centred = (neighbours - (mean[:, None] if centre else 0.0)) * weight
        _, vectors = np.linalg.eigh(np.matmul(centred.transpose(0, 2, 1), centred))
        normal = vectors[:, :, column]
        normal[(normal * query).sum(axis=1) > 0] *= -1
        return normal

    return pca


@pytest.mark.parametrize('mutation', ['max_nn=20', 'max_nn=40', 'radius=0.01', 'no centring',
                                      'largest eigenvector', 'middle eigenvector'])
def test_the_check_catches_a_wrong_rule(golden, mutation, monkeypatch):
    points, expected = golden
    if mutation.startswith(('max_nn', 'radius')):
        name, value = mutation.split('=')
        normals = estimate_normals(points, **{name: type(getattr(point_normals, name.upper()))(
            value)})
    else:
        monkeypatch.setattr(point_normals, 'pca_normals', _mutated(
            centre=mutation != 'no centring',
            column={'no centring': 0, 'largest eigenvector': 2, 'middle eigenvector': 1}[
                mutation]))
        normals = estimate_normals(points)
    assert not agrees_with_open3d(normals, expected)


def test_a_tilted_plane_gives_its_normal():
    u, v = np.meshgrid(np.linspace(-0.2, 0.2, 61), np.linspace(-0.15, 0.15, 47))
    x, y = u.ravel(), v.ravel()
    points = np.stack([x, y, 0.6 + 0.3 * x - 0.2 * y], axis=1)
    expected = np.array([0.3, -0.2, -1.0]) / np.linalg.norm([0.3, -0.2, -1.0])  # faces z < 0
    normals = estimate_normals(points)
    np.testing.assert_allclose(normals, np.broadcast_to(expected, normals.shape), atol=1e-6)


def test_a_sphere_gives_its_radial_normals():
    """The front of a sphere (centre 0.8 m ahead, radius 0.1 m): outward normals face the
    camera; PCA over a ~1 cm patch of a 10 cm sphere is radial to within a small bias."""
    i = np.arange(20000) + 0.5
    polar, azimuth = np.arccos(1 - i / len(i)), np.pi * (1 + 5 ** 0.5) * i  # front hemisphere
    radial = np.stack([np.sin(polar) * np.cos(azimuth), np.sin(polar) * np.sin(azimuth),
                       -np.cos(polar)], axis=1)
    centre = np.array([0.0, 0.0, 0.8])
    normals = estimate_normals(centre + 0.1 * radial)
    inner = polar < np.radians(70)  # away from the rim, where neighbourhoods are one-sided
    cosine = (normals[inner] * radial[inner]).sum(axis=1)
    assert cosine.min() > np.cos(np.radians(0.5))  # signed: the orientation is outward too


def test_degenerate_clouds_follow_the_rule():
    empty = estimate_normals(np.zeros((0, 3), np.float32))
    assert empty.shape == (0, 3) and empty.dtype == np.float32
    # fewer than 3 neighbours within 0.1 m, or all on one spot: open3d's (0, 0, 1), oriented
    for points in ([[0.1, 0.2, 0.7]], [[0.1, 0.2, 0.7], [0.1, 0.21, 0.7]],
                   [[0.1, 0.2, 0.7]] * 5, [[0, 0, 1.0], [0, 0, 1.5], [0, 0, 2.0]]):
        np.testing.assert_array_equal(estimate_normals(np.array(points)),
                                      [[0, 0, -1]] * len(points))
    np.testing.assert_array_equal(estimate_normals(np.zeros((1, 3))), [[0, 0, 1]])  # n.p = 0
    # collinear: finite unit vectors orthogonal to the line, facing the camera
    t = np.linspace(0, 0.05, 12)[:, None]
    points = np.array([0.1, -0.05, 0.6]) + t * np.array([1.0, 2.0, 0.5])
    normals = estimate_normals(points).astype(np.float64)
    assert np.isfinite(normals).all()
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(normals @ [1.0, 2.0, 0.5], 0, atol=1e-6)
    assert ((normals * points).sum(axis=1) <= 0).all()
    # fewer points than max_nn
    assert estimate_normals(points[:4], max_nn=30).shape == (4, 3)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r'points must be \(N, 3\)'):
        estimate_normals(np.zeros((4, 2)))
    points = np.zeros((4, 3))
    points[2, 1] = np.nan
    with pytest.raises(ValueError, match='point 2 is not finite'):
        estimate_normals(points)
    with pytest.raises(ValueError, match='radius must be > 0'):
        estimate_normals(points[:1], radius=0)
