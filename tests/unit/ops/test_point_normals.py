"""The normals rule against open3d's estimate_normals (a stored golden: the values and the sign),
neighbourhoods and their ties against a brute-force search, the torch reference and the batch
path against the numpy rule bit for bit, the two settings, closed-form surfaces, mutations of
the rule, degenerate clouds."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.ops import normal_rule, point_normals
from mmgrasp.ops.point_normals import (batch_normals, batch_normals_reference,
                                       estimate_normals, kdtree_neighbours)

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), 'data', 'normals_golden', 'golden.npz')
TIE = 2606  # the golden's one point whose 30th neighbour is tied: open3d takes another one
COLLINEAR = slice(-3, None)  # the golden's last three points lie on one line


def angle_up_to_sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Degrees between the lines of unit vectors ``a`` and ``b``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=1),
                                 np.abs((a * b).sum(axis=1))))


@pytest.fixture(scope='module')
def golden():
    with np.load(GOLDEN) as npz:
        assert str(npz['open3d_version']) == '0.20.0'
        return npz['points'], npz['normals']


def equals_open3d(normals: np.ndarray, expected: np.ndarray) -> bool:
    """The solver rule's check: float32 bit for bit, the sign included, on every point but the
    tie (where open3d's k-d tree takes another 30th neighbour: 0.077° off)."""
    same = (normals == expected.astype(np.float32)).all(axis=1)
    return bool(same.sum() == len(same) - 1 and not same[TIE])


def close_to_open3d64(normals: np.ndarray, expected: np.ndarray) -> bool:
    """The same in float64, before the rounding: within 2e-15 of open3d's, the sign included,
    but at the tie. (The cubic's roots by bisection instead of acos and cos: 1.2e-15 at most;
    a mean-centred covariance, the same in exact arithmetic, is 2e-12 off.)"""
    error = np.abs(normals - expected).max(axis=1)
    return bool(np.delete(error, TIE).max() < 2e-15 and error[TIE] > 1e-4)


def rule64(points: np.ndarray, radius: float = 0.1, max_nn: int = 30,
           orientation: str = 'solver') -> np.ndarray:
    """estimate_normals' float64 normals, before the rounding."""
    points = points.astype(np.float64)
    index, count = kdtree_neighbours(points, radius, max_nn)
    padded = np.concatenate([points, np.zeros((1, 3))])
    return normal_rule.normals64(points, padded[index], count, orientation, 1.0)


def test_the_solver_rule_is_open3ds_including_the_sign(golden):
    points, expected = golden
    normals = estimate_normals(points, orientation='solver')
    assert normals.dtype == np.float32 and normals.shape == points.shape
    assert equals_open3d(normals, expected)
    assert close_to_open3d64(rule64(points), expected)
    assert angle_up_to_sign(normals[TIE:TIE + 1], expected[TIE:TIE + 1])[0] < 0.1
    # open3d's sign is its solver's: here 82 % of its normals face away from the camera
    away = (expected * points).sum(axis=1) > 0
    assert 0.5 < away.mean() < 0.95
    assert ((normals.astype(np.float64) * points).sum(axis=1) > 0).tolist() == away.tolist()


def test_the_camera_rule_turns_open3ds_normals_to_the_camera(golden):
    points, expected = golden
    normals = estimate_normals(points)  # orientation='camera' by default
    turned = np.where(((expected * points).sum(axis=1) > 0)[:, None], -expected, expected)
    assert equals_open3d(normals, turned)
    assert ((normals.astype(np.float64) * points).sum(axis=1) <= 0).all()
    # the isolated points: open3d's (0, 0, 1), turned; the collinear triple: the axis open3d's
    # solver takes for a matrix without off-diagonal part
    np.testing.assert_array_equal(expected[-6:-3], [[0, 0, 1]] * 3)
    np.testing.assert_array_equal(normals[-6:-3], [[0, 0, -1]] * 3)
    np.testing.assert_array_equal(normals[COLLINEAR], expected[COLLINEAR].astype(np.float32)
                                  * np.sign(-expected[COLLINEAR, 2:3]).astype(np.float32))


def test_each_setting_changes_the_normals(golden):
    points, _ = golden
    camera = estimate_normals(points, orientation='camera')
    solver = estimate_normals(points, orientation='solver')
    flipped = ~(camera == solver).all(axis=1)
    assert 0.5 < flipped.mean() < 0.95
    np.testing.assert_array_equal(camera[flipped], -solver[flipped])
    scaled = estimate_normals(points, scale=1 / 255)
    assert not np.array_equal(scaled, camera)
    # the unit normal times 1/255 in float64, then rounded: within one float32 step of it
    np.testing.assert_allclose(scaled, camera.astype(np.float64) / 255, rtol=1.2e-7, atol=0)
    assert not np.array_equal(estimate_normals(points, radius=0.01), camera)
    assert not np.array_equal(estimate_normals(points, max_nn=20), camera)


def _eigh_smallest(covariance):
    """A different solver (LAPACK's): the same lines, its own signs."""
    c00, c01, c02, c11, c12, c22 = covariance
    matrices = np.stack([np.stack([c00, c01, c02], -1), np.stack([c01, c11, c12], -1),
                         np.stack([c02, c12, c22], -1)], -2)
    vectors = np.linalg.eigh(matrices)[1][..., 0]
    return vectors[:, 0], vectors[:, 1], vectors[:, 2]


def _mean_centred(query, neighbours, count, orientation, scale):
    """normals64 with a two-pass (mean-centred) covariance."""
    taken = np.arange(neighbours.shape[1])[None] < count[:, None]
    mean = (neighbours * taken[..., None]).sum(1) / np.maximum(count, 1)[:, None]
    return original_rule(query, (neighbours - mean[:, None]) * taken[..., None], count,
                         orientation, scale)


original_rule = normal_rule.normals64


@pytest.mark.parametrize('mutation', ['max_nn=20', 'max_nn=40', 'radius=0.01', 'eigh solver',
                                      'largest eigenvalue', 'mean-centred covariance',
                                      'camera orientation'])
def test_the_check_catches_a_wrong_rule(golden, mutation, monkeypatch):
    points, expected = golden
    options = dict(orientation='solver')
    if mutation.startswith(('max_nn', 'radius')):
        name, value = mutation.split('=')
        options[name] = type(getattr(point_normals, name.upper()))(value)
    elif mutation == 'eigh solver':
        monkeypatch.setattr(normal_rule, 'fast_eigen3x3', _eigh_smallest)
    elif mutation == 'largest eigenvalue':
        monkeypatch.setattr(normal_rule, '_cubic_root',
                            lambda h, low, high: h * 0.0 + (2.0 if low > 0 else 1.0))
    elif mutation == 'mean-centred covariance':
        monkeypatch.setattr(normal_rule, 'normals64', _mean_centred)
    else:
        options['orientation'] = 'camera'
    normals = rule64(points, **options)
    assert not close_to_open3d64(normals, expected)
    if mutation == 'eigh solver':  # the lines agree: only the sign tells the solvers apart
        assert np.percentile(angle_up_to_sign(normals, expected), 99) < 1e-4


def brute_force_neighbours(points: np.ndarray, radius: float, max_nn: int) -> np.ndarray:
    """The rule's neighbourhoods from every pair: by (squared distance, index)."""
    points = points.astype(np.float64)
    d = points[None] - points[:, None]
    d2 = (d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) + d[..., 2] * d[..., 2]
    out = np.full((len(points), max_nn), len(points))
    for i, row in enumerate(d2):
        order = np.lexsort((np.arange(len(points)), row))
        order = order[row[order] < radius * radius][:max_nn]
        out[i, :len(order)] = order
    return out


def tied_cloud(seed: int = 0) -> np.ndarray:
    """A grid (equal distances everywhere), 45 copies of one point (more ties than the k-d
    tree is asked for), a random patch and two isolated points."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(12), np.arange(12), [0]), -1).reshape(-1, 3) * 0.004
    copies = np.repeat([[0.2, 0.1, 0.6]], 45, axis=0)
    patch = rng.normal([0.25, 0.1, 0.62], 0.01, (80, 3))
    isolated = [[0.9, 0.9, 1.0], [-0.9, 0.9, 1.0]]
    cloud = np.concatenate([grid + [0.0, 0.0, 0.7], copies, patch, isolated]).astype(np.float32)
    return cloud[rng.permutation(len(cloud))]


def test_neighbours_are_the_nearest_by_distance_then_index():
    cloud = tied_cloud()
    expected = brute_force_neighbours(cloud, 0.1, 30)
    index, count = kdtree_neighbours(cloud.astype(np.float64), 0.1, 30)
    np.testing.assert_array_equal(index, expected)
    np.testing.assert_array_equal(count, (expected < len(cloud)).sum(1))
    assert set(count.tolist()) >= {1, 30}
    # the torch reference's search too (its normals below are its neighbourhoods' sums)
    reference = batch_normals_reference(torch.from_numpy(np.stack([cloud, cloud[::-1]])))
    assert reference[0].numpy().tobytes() == estimate_normals(cloud).tobytes()
    assert reference[1].numpy().tobytes() == estimate_normals(cloud[::-1]).tobytes()
    # fewer points than max_nn
    np.testing.assert_array_equal(kdtree_neighbours(cloud[:5].astype(np.float64), 0.1, 30)[0],
                                  brute_force_neighbours(cloud[:5], 0.1, 30))


@pytest.mark.parametrize('orientation,scale', [('camera', 1.0), ('solver', 1 / 255)])
def test_the_batch_paths_give_the_workers_bits(golden, orientation, scale):
    points, _ = golden
    batch = torch.from_numpy(np.stack([points[:600], points[3400:4000]]))
    expected = np.stack([estimate_normals(f, orientation=orientation, scale=scale)
                         for f in batch.numpy()])
    got = batch_normals(batch, orientation=orientation, scale=scale)
    assert got.dtype == torch.float32 and got.numpy().tobytes() == expected.tobytes()
    reference = batch_normals_reference(batch, orientation=orientation, scale=scale)
    assert reference.numpy().tobytes() == expected.tobytes()


def test_a_tilted_plane_gives_its_normal():
    u, v = np.meshgrid(np.linspace(-0.2, 0.2, 61), np.linspace(-0.15, 0.15, 47))
    x, y = u.ravel(), v.ravel()
    points = np.stack([x, y, 0.6 + 0.3 * x - 0.2 * y], axis=1)
    expected = np.array([0.3, -0.2, -1.0]) / np.linalg.norm([0.3, -0.2, -1.0])  # faces z < 0
    normals = estimate_normals(points)
    np.testing.assert_allclose(normals, np.broadcast_to(expected, normals.shape), atol=1e-6)
    solver = estimate_normals(points, orientation='solver')
    np.testing.assert_allclose(np.abs(solver), np.abs(normals), atol=1e-6)


def test_a_sphere_gives_its_radial_normals():
    """The front of a sphere (centre 0.8 m ahead, radius 0.1 m): outward normals face the
    camera; PCA over a ~1 cm patch of a 10 cm sphere is radial to within a small bias."""
    i = np.arange(20000) + 0.5
    polar, azimuth = np.arccos(1 - i / len(i)), np.pi * (1 + 5 ** 0.5) * i  # front hemisphere
    radial = np.stack([np.sin(polar) * np.cos(azimuth), np.sin(polar) * np.sin(azimuth),
                       -np.cos(polar)], axis=1)
    normals = estimate_normals(np.array([0.0, 0.0, 0.8]) + 0.1 * radial)
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
        np.testing.assert_array_equal(estimate_normals(np.array(points), orientation='solver'),
                                      [[0, 0, 1]] * len(points))
    np.testing.assert_array_equal(estimate_normals(np.zeros((1, 3))), [[0, 0, 1]])  # n.p = 0
    # collinear: finite unit vectors orthogonal to the line, facing the camera
    t = np.linspace(0, 0.05, 12)[:, None]
    points = np.array([0.1, -0.05, 0.6]) + t * np.array([1.0, 2.0, 0.5])
    normals = estimate_normals(points).astype(np.float64)
    assert np.isfinite(normals).all()
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(normals @ [1.0, 2.0, 0.5], 0, atol=1e-6)
    assert ((normals * points).sum(axis=1) <= 0).all()


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r'points must be \(N, 3\)'):
        estimate_normals(np.zeros((4, 2)))
    points = np.zeros((4, 3))
    points[2, 1] = np.nan
    with pytest.raises(ValueError, match='point 2 is not finite'):
        estimate_normals(points)
    for options, message in ((dict(radius=0), 'radius must be'), (dict(max_nn=0), 'max_nn'),
                             (dict(orientation='up'), "orientation='up'"),
                             (dict(scale=-1.0), 'scale must be')):
        with pytest.raises(ValueError, match=message):
            estimate_normals(points[:1], **options)
    with pytest.raises(ValueError, match=r'\(B, N, 3\) float32'):
        batch_normals(torch.zeros(2, 5, 3, dtype=torch.float64))
