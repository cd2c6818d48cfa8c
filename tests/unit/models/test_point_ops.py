"""Point ops against plain numpy loops that follow pointnet2's CUDA kernels."""
import numpy as np
import pytest
import torch

from mmgrasp.ops import (ball_query, cylinder_query, furthest_point_sample,
                         gather_points, group_points, knn, three_nn_interpolate)
from mmgrasp.ops import point_ops


def _points(batch=2, n=300, seed=0):
    return torch.rand(batch, n, 3, generator=torch.Generator().manual_seed(seed)) * 0.2


def _fps_ref(xyz, num, mask):
    """One sample: the greedy loop over eligible points, then cyclic padding."""
    eligible = np.flatnonzero(mask)
    if len(eligible) == 0:
        return np.zeros(num, dtype=np.int64)
    picks = [eligible[0]]
    nearest = np.full(len(xyz), np.inf)
    while len(picks) < min(num, len(eligible)):
        nearest = np.minimum(nearest, ((xyz - xyz[picks[-1]]) ** 2).sum(1))
        nearest[~mask] = -1
        picks.append(int(np.argmax(nearest)))
    return np.array([picks[j % len(picks)] for j in range(num)])


def _first_ref(inside, nsample):
    hits = np.flatnonzero(inside)[:nsample]
    if len(hits) == 0:
        return np.zeros(nsample, dtype=np.int64)
    return np.concatenate([hits, np.full(nsample - len(hits), hits[0])])


def test_fps_matches_reference_with_and_without_mask():
    xyz = _points()
    mask = torch.rand(2, 300, generator=torch.Generator().manual_seed(1)) < 0.5
    mask[1, :] = False
    mask[1, [7, 50, 120]] = True  # 3 eligible < 10 requested: cyclic padding
    for m in (None, mask):
        out = furthest_point_sample(xyz, 10, m)
        assert out.shape == (2, 10) and out.dtype == torch.long
        for b in range(2):
            eligible = np.ones(300, bool) if m is None else m[b].numpy()
            np.testing.assert_array_equal(out[b].numpy(), _fps_ref(xyz[b].numpy(), 10, eligible))
    picks = out[1, :3].tolist()
    assert sorted(picks) == [7, 50, 120] and out[1].tolist() == picks * 3 + picks[:1]
    assert furthest_point_sample(xyz, 4, torch.zeros(2, 300, dtype=torch.bool)).eq(0).all()


def _fps_before(xyz, num, mask=None):
    """The implementation the vectorised one replaced (one (B, N, 3) sum per step), kept to
    show the indices did not change."""
    batch, n, _ = xyz.shape
    arange = torch.arange(batch)
    eligible = torch.ones(batch, n, dtype=torch.bool) if mask is None else mask.bool()
    nearest = torch.where(eligible, torch.full_like(xyz[..., 0], 1e10),
                          torch.full_like(xyz[..., 0], -1.0))
    current = eligible.to(torch.uint8).argmax(dim=1)
    idx = torch.empty(batch, num, dtype=torch.long)
    for j in range(num):
        idx[:, j] = current
        dist = ((xyz - xyz[arange, current][:, None]) ** 2).sum(-1)
        nearest = torch.minimum(nearest, dist)
        current = nearest.argmax(dim=1)
    count = eligible.sum(dim=1, keepdim=True).clamp_(min=1, max=num)
    return idx.gather(1, torch.arange(num)[None] % count)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_fps_indices_identical_to_the_earlier_implementation(dtype):
    generator = torch.Generator().manual_seed(4)
    clouds = [torch.randn(3, 2000, 3, generator=generator) * 0.3,  # realistic spread
              torch.randint(0, 6, (2, 500, 3), generator=generator).float() * 0.01,  # ties
              torch.rand(2, 400, 3, generator=generator) * 1e3 + 5e3]  # large offsets
    for xyz in clouds:
        xyz = xyz.to(dtype)
        mask = torch.rand(xyz.shape[:2], generator=generator) < 0.6
        for m in (None, mask):
            for num in (1, 37, 256):
                assert torch.equal(furthest_point_sample(xyz, num, m), _fps_before(xyz, num, m))
    assert furthest_point_sample(xyz, 0).shape == (2, 0)


def test_knn_matches_brute_force(monkeypatch):
    monkeypatch.setattr(point_ops, '_CHUNK_ELEMENTS', 1000)  # several query chunks
    ref, query = _points(seed=2), _points(n=40, seed=3)
    dist, idx = knn(ref, query, 5)
    d = np.linalg.norm(query.numpy()[:, :, None] - ref.numpy()[:, None], axis=-1)
    np.testing.assert_array_equal(idx.numpy(), np.argsort(d, axis=-1, kind='stable')[..., :5])
    np.testing.assert_allclose(dist.numpy(), np.sort(d, axis=-1)[..., :5], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize('chunk', [1 << 23, 1000])
def test_ball_query_matches_reference(monkeypatch, chunk):
    monkeypatch.setattr(point_ops, '_CHUNK_ELEMENTS', chunk)
    xyz, centres = _points(seed=4), _points(n=30, seed=5)
    centres[0, 0] = 5.0  # no neighbours: all zeros
    out = ball_query(0.03, 8, xyz, centres)
    d2 = ((xyz.numpy()[:, None] - centres.numpy()[:, :, None]) ** 2).sum(-1)
    for b in range(2):
        for s in range(30):
            np.testing.assert_array_equal(out[b, s].numpy(), _first_ref(d2[b, s] < 0.03 ** 2, 8))
    assert out[0, 0].eq(0).all()
    wide = ball_query(1.0, 400, xyz, centres[:, 1:])  # nsample > N: padded with the first
    assert wide.shape == (2, 29, 400) and wide[..., 300:].eq(0).all()


@pytest.mark.parametrize('chunk', [1 << 23, 1000])
def test_cylinder_query_matches_reference(monkeypatch, chunk):
    monkeypatch.setattr(point_ops, '_CHUNK_ELEMENTS', chunk)
    xyz = _points(n=400, seed=6)
    idx = furthest_point_sample(xyz, 25)
    centres = gather_points(xyz.transpose(1, 2), idx).transpose(1, 2)
    rot = torch.linalg.qr(torch.randn(2, 25, 3, 3, generator=torch.Generator().manual_seed(7)))[0]
    out = cylinder_query(0.04, -0.02, 0.03, 16, xyz, centres, rot)
    x, c, r = xyz.numpy(), centres.numpy(), rot.numpy()
    hits = 0
    for b in range(2):
        for s in range(25):
            local = (x[b] - c[b, s]) @ r[b, s]  # rows of Rᵀ(q − c)
            inside = (local[:, 0] > -0.02) & (local[:, 0] < 0.03) & \
                     (local[:, 1] ** 2 + local[:, 2] ** 2 < 0.04 ** 2)
            hits += inside.sum()
            np.testing.assert_array_equal(out[b, s].numpy(), _first_ref(inside, 16))
    assert hits > 0


def test_group_and_gather_points():
    feats = torch.randn(2, 4, 30)
    idx = torch.randint(0, 30, (2, 5, 3))
    grouped = group_points(feats, idx)
    assert grouped.shape == (2, 4, 5, 3)
    assert torch.equal(grouped[1, :, 2, 1], feats[1, :, idx[1, 2, 1]])
    gathered = gather_points(feats, idx[..., 0])
    assert gathered.shape == (2, 4, 5) and torch.equal(gathered[0, :, 3], feats[0, :, idx[0, 3, 0]])


def test_three_nn_interpolate():
    known, unknown = _points(n=50, seed=8), _points(n=20, seed=9)
    feats = torch.randn(2, 6, 50)
    ones = three_nn_interpolate(unknown, known, torch.ones(2, 1, 50))
    torch.testing.assert_close(ones, torch.ones(2, 1, 20))  # weights sum to 1
    torch.testing.assert_close(three_nn_interpolate(known[:, :10], known, feats), feats[..., :10],
                               rtol=1e-4, atol=1e-4)  # exact at known points
    out = three_nn_interpolate(unknown, known, feats)
    d = np.linalg.norm(unknown.numpy()[:, :, None] - known.numpy()[:, None], axis=-1)
    nn = np.argsort(d, axis=-1)[..., :3]
    w = 1 / (np.take_along_axis(d, nn, -1) + 1e-8)
    w /= w.sum(-1, keepdims=True)
    ref = np.stack([(feats[b].numpy()[:, nn[b]] * w[b]).sum(-1) for b in range(2)])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
    assert three_nn_interpolate(unknown, known[:, :2], feats[..., :2]).shape == (2, 6, 20)
