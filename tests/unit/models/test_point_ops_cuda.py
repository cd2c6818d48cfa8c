"""The point operators on CUDA give the CPU's indices exactly (furthest-point sampling, ball and
cylinder queries, kNN) and its gathered features; gathers' gradients are bit-repeatable under
``torch.use_deterministic_algorithms(True)``."""
import pytest
import torch

from mmgrasp.ops import (ball_query, cylinder_query, furthest_point_sample,
                         group_points, knn, three_nn_interpolate)

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]


def _points(batch=3, n=5000, seed=0):
    return torch.randn(batch, n, 3, generator=torch.Generator().manual_seed(seed)) * 0.2


def test_fps_identical_on_cuda():
    xyz = _points()
    mask = torch.rand(3, 5000, generator=torch.Generator().manual_seed(1)) < 0.4
    for m in (None, mask):
        cpu = furthest_point_sample(xyz, 1024, m)
        cuda = furthest_point_sample(xyz.cuda(), 1024, None if m is None else m.cuda())
        assert torch.equal(cuda.cpu(), cpu)


def test_queries_identical_on_cuda():
    xyz = _points()
    centres = xyz[:, :256].contiguous()
    rot = torch.linalg.qr(torch.randn(3, 256, 3, 3,
                                      generator=torch.Generator().manual_seed(2))).Q
    assert torch.equal(ball_query(0.05, 32, xyz.cuda(), centres.cuda()).cpu(),
                       ball_query(0.05, 32, xyz, centres))
    assert torch.equal(
        cylinder_query(0.05, -0.02, 0.04, 32, xyz.cuda(), centres.cuda(), rot.cuda()).cpu(),
        cylinder_query(0.05, -0.02, 0.04, 32, xyz, centres, rot))
    dist_cpu, idx_cpu = knn(xyz, centres, 3)
    dist_cuda, idx_cuda = knn(xyz.cuda(), centres.cuda(), 3)
    assert torch.equal(idx_cuda.cpu(), idx_cpu)
    torch.testing.assert_close(dist_cuda.cpu(), dist_cpu)


def _gradients(device: str):
    xyz = _points(n=2000).to(device)
    feats = torch.randn(3, 16, 2000, generator=torch.Generator().manual_seed(3)).to(device)
    feats.requires_grad_(True)
    centres = xyz[:, :128].contiguous()
    grouped = group_points(feats, ball_query(0.1, 16, xyz, centres))  # repeated indices
    up = three_nn_interpolate(xyz, centres, grouped.mean(-1))
    (grouped.square().sum() + up.sum()).backward()
    return grouped.detach(), up.detach(), feats.grad


def test_gathers_match_the_cpu_and_repeat_bit_for_bit():
    cpu = _gradients('cpu')
    torch.use_deterministic_algorithms(True)
    try:
        first, second = _gradients('cuda'), _gradients('cuda')
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b, c in zip(first, second, cpu):
        assert torch.equal(a, b)
        torch.testing.assert_close(a.cpu(), c, rtol=1e-4, atol=1e-5)
