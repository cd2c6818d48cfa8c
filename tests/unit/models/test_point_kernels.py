"""Each Triton point kernel gives exactly its torch reference's indices (and the nearest
neighbours' squared distances), run on CPU tensors by Triton's interpreter: fewer points than
samples, duplicate points, empty balls and crops, thresholds met exactly, a batch of one,
masks."""
import os
import sys

import pytest
import torch

# read when triton's own and our kernels are decorated: it must be set before triton is imported
_INTERPRETED = 'triton' not in sys.modules and not torch.cuda.is_available()
if _INTERPRETED:
    os.environ['TRITON_INTERPRET'] = '1'
triton = pytest.importorskip('triton')

from mmgrasp.ops import point_kernels  # noqa: E402
from mmgrasp.ops.point_ops import (KNN_KERNEL_MAX_K,  # noqa: E402
                                   _furthest_point_sample_reference, _knn_reference,
                                   ball_query, cylinder_queries, cylinder_query,
                                   furthest_point_sample, knn)
from mmgrasp.ops.numerics import point_ops_backend  # noqa: E402

pytestmark = pytest.mark.skipif(
    not _INTERPRETED, reason='triton was imported for the GPU before this module (with a GPU: '
                             'tests/unit/models/test_point_ops_cuda.py compares the kernels)')


def _points(batch=2, n=300, seed=0, scale=0.1):
    return torch.randn(batch, n, 3, generator=torch.Generator().manual_seed(seed)) * scale


def _rotations(batch, s, seed):
    return torch.linalg.qr(torch.randn(batch, s, 3, 3,
                                       generator=torch.Generator().manual_seed(seed))).Q


def _duplicated(xyz):
    """Every third point repeats the point before it: ties everywhere."""
    xyz = xyz.clone()
    xyz[:, 1::3] = xyz[:, 0:-1:3][:, :xyz[:, 1::3].shape[1]]
    return xyz


@pytest.mark.parametrize('batch,n,num', [(1, 300, 64), (2, 2100, 40), (2, 40, 64)])
def test_fps_kernel_equals_reference(batch, n, num):
    """n=2100 spans three blocks of the kernel; n=40 < num wraps the picks cyclically."""
    xyz = _duplicated(_points(batch, n, seed=n))
    masks = [None, torch.rand(batch, n, generator=torch.Generator().manual_seed(1)) < 0.3,
             torch.zeros(batch, n, dtype=torch.bool)]  # nothing eligible: zeros
    masks[1][0, :] = False
    masks[1][0, 7] = True  # a single eligible point: it repeats
    for mask in masks:
        expected = _furthest_point_sample_reference(xyz, num, mask)
        assert torch.equal(point_kernels.furthest_point_sample(xyz, num, mask), expected)
    assert (point_kernels.furthest_point_sample(xyz, num, masks[1])[0] == 7).all()


def test_fps_of_identical_points_keeps_the_lowest_index():
    """Every distance is 0, so each step's tie goes to index 0, as in the reference."""
    xyz = torch.zeros(1, 10, 3)
    assert torch.equal(point_kernels.furthest_point_sample(xyz, 4), torch.zeros(1, 4).long())
    assert torch.equal(point_kernels.furthest_point_sample(xyz, 4),
                       _furthest_point_sample_reference(xyz, 4, None))


@pytest.mark.parametrize('a,b', [(5, 1026), (2, 1026), (1030, 2050), (1023, 1024)])
def test_fps_tie_across_chunks_goes_to_the_lower_index(a, b):
    """Two equally far points in different 1024-point chunks, in a lower lane (1026 is lane 2,
    below 5), the same lane (2, 1026) or neighbouring lanes: the lower index wins, as in the
    reference, with and without a mask."""
    xyz = torch.zeros(1, 2100, 3)
    xyz[0, [a, b]] = torch.tensor([1.0, 0.0, 0.0])
    mask = torch.ones(1, 2100, dtype=torch.bool)
    mask[0, 1] = False
    for m in (None, mask):
        got = point_kernels.furthest_point_sample(xyz, 4, m)
        assert got[0, 1] == min(a, b)
        assert torch.equal(got, _furthest_point_sample_reference(xyz, 4, m))


def test_fps_of_points_repeated_in_other_chunks_and_lanes():
    """The first chunk's points again, shuffled, in the second and third chunks: every step
    ties across chunks and lanes."""
    base = _points(1, 1024, seed=5)
    perm = torch.randperm(1024, generator=torch.Generator().manual_seed(6))
    xyz = torch.cat([base, base[:, perm], base[:, perm.flip(0)][:, :500]], dim=1)
    mask = torch.rand(1, xyz.shape[1], generator=torch.Generator().manual_seed(7)) < 0.5
    for m in (None, mask):
        assert torch.equal(point_kernels.furthest_point_sample(xyz, 40, m),
                           _furthest_point_sample_reference(xyz, 40, m))


@pytest.mark.parametrize('batch,n,s,nsample', [(1, 300, 20, 16), (2, 2100, 12, 8),
                                               (2, 50, 10, 64)])
def test_ball_query_kernel_equals_reference(batch, n, s, nsample):
    xyz = _duplicated(_points(batch, n, seed=n + 1))
    centres = xyz[:, :s].clone()
    centres[0, 0] = 5.0  # an empty ball: all zeros
    # a point exactly on the sphere (distance² == radius² in float32) is outside
    xyz[0, -1] = centres[0, 1] + torch.tensor([0.0625, 0.0, 0.0])
    for radius in (0.0625, 0.03, 10.0):  # 10: every point inside, nsample > n pads
        expected = ball_query(radius, nsample, xyz, centres)
        assert torch.equal(point_kernels.ball_query(radius, nsample, xyz, centres), expected)
    assert (point_kernels.ball_query(0.03, nsample, xyz, centres)[0, 0] == 0).all()


@pytest.mark.slow
@pytest.mark.parametrize('batch,n,s', [(1, 400, 25), (2, 1100, 7)])
def test_cylinder_query_kernel_equals_reference(batch, n, s):
    xyz = _duplicated(_points(batch, n, seed=n + 2, scale=0.05))
    centres = xyz[:, ::max(1, n // s)][:, :s].clone()
    centres[-1, -1] = 3.0  # an empty crop
    rot = _rotations(batch, s, seed=s)
    radii, hmax = (0.01, 0.02, 0.05), (0.01, 0.04)
    for nsample in (16, 1024):  # 1024: crops hold fewer points than samples, padded
        expected = cylinder_queries(xyz, centres, rot, radii, -0.02, hmax, nsample)
        got = point_kernels.cylinder_queries(xyz, centres, rot, radii, -0.02, hmax, nsample)
        assert torch.equal(got, expected)
        assert (got[0, 0, -1, -1] == 0).all()


@pytest.mark.parametrize('m', [1, 2, 3, 200])
def test_three_nn_kernel_equals_reference(m):
    ref = _duplicated(_points(2, m, seed=m + 3)) if m > 2 else _points(2, m, seed=m + 3)
    query = torch.cat([_points(2, 150, seed=m + 4), ref], dim=1)  # queries on reference points
    k = min(3, m)
    dist2, idx = _knn_reference(ref, query, k)
    got_dist2, got_idx = point_kernels.three_nn(ref, query)
    assert torch.equal(got_idx[..., :k], idx)
    assert torch.equal(got_dist2[..., :k], dist2)


@pytest.mark.parametrize('k,m', [(8, 24), (5, 24), (16, 18), (8, 5)])
def test_knn_kernel_equals_reference(k, m):
    """Duplicated reference points and queries on them (equal distances: the lower index
    first, in the kept set and in its order), k below its slots (5 of 8: padding slots), as
    many as the slots, more than the reference points (all of them); a frame where every
    distance is 0 keeps indices 0..k-1, as pytorch3d's knn_points does there."""
    ref = _duplicated(_points(2, m, seed=m + k))
    query = torch.cat([_points(2, 40, seed=m + k + 1), ref], dim=1)
    ref[1], query[1] = 0.0, 0.0
    dist2, idx = _knn_reference(ref, query, k)
    got_dist2, got_idx = point_kernels.knn(ref, query, k)
    assert got_idx.shape == (2, 40 + m, min(k, m))
    assert torch.equal(got_idx, idx) and torch.equal(got_dist2, dist2)
    assert (got_idx[1] == torch.arange(min(k, m))).all()
    assert point_kernels.KNN_SLOTS[-1] == KNN_KERNEL_MAX_K  # the largest k knn sends here


def test_the_switch_chooses_kernels_or_references(monkeypatch):
    """``auto``: references on CPU tensors; ``triton``: the kernels (here interpreted), giving the
    same results through the public ops; an unknown value is an error."""
    xyz = _duplicated(_points(1, 120, seed=9))
    rot = _rotations(1, 6, seed=9)
    calls = []
    for name in ('furthest_point_sample', 'ball_query', 'cylinder_queries', 'three_nn', 'knn'):
        original = getattr(point_kernels, name)
        monkeypatch.setattr(point_kernels, name,
                            lambda *a, _f=original, _n=name: calls.append(_n) or _f(*a))

    def run():
        return (furthest_point_sample(xyz, 10), ball_query(0.05, 8, xyz, xyz[:, :6]),
                cylinder_query(0.05, -0.02, 0.04, 8, xyz, xyz[:, :6], rot),
                *knn(xyz, xyz[:, :6], 3), *knn(xyz[:, :20], xyz[:, :6], 8))

    reference = run()
    assert calls == []
    with point_ops_backend('triton'):
        kernels = run()
        knn(xyz[:, :20], xyz[:, :6], 17)  # past the kernel's slots: the reference
    assert calls == ['furthest_point_sample', 'ball_query', 'cylinder_queries', 'three_nn',
                     'knn']
    for a, b in zip(kernels, reference):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="point_ops='cuda'"):
        with point_ops_backend('cuda'):
            furthest_point_sample(xyz, 10)
