"""The pure-PyTorch sparse convolution on CUDA: equal to the CPU result within float tolerance
(forward and gradients, one convolution of each kind and the whole SparseUNet14), and
bit-repeatable under ``torch.use_deterministic_algorithms(True)``."""
import copy
import os

import pytest
import torch

from _sparse_inputs import SMALL_UNET, table_and_hemisphere
from mmgrasp.models.backbones.sparse_unet import SparseUNet14
from mmgrasp.ops import SparseConv3d, SparseConvTranspose3d, voxelize

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]


@pytest.fixture(autouse=True)
def _full_float32_and_cublas_workspace(monkeypatch):
    """TF32 off (the comparison is against float32 CPU maths); the cuBLAS workspace setting
    that deterministic matrix products need."""
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', os.environ.get('CUBLAS_WORKSPACE_CONFIG',
                                                                 ':4096:8'))
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def _conv_chain(device: str):
    """Submanifold, strided and transposed convolutions with their gradients."""
    torch.manual_seed(0)
    convs = [SparseConv3d(4, 8, 3), SparseConv3d(8, 16, 2, stride=2),
             SparseConvTranspose3d(16, 8, 2, stride=2)]
    points = table_and_hemisphere(n=2000).to(device)
    feats = torch.randn(2, 2000, 4, generator=torch.Generator().manual_seed(1)).to(device)
    feats.requires_grad_(True)
    x, _ = voxelize(points, 0.01, feats)
    convs = [c.to(device) for c in convs]
    fine = convs[0](x)
    coarse = convs[1](fine)
    out = convs[2](coarse, fine)
    (out.feats.square().sum() + coarse.feats.sum()).backward()
    return [out.feats.detach(), coarse.feats.detach(), feats.grad] + \
        [p.grad for c in convs for p in c.parameters()]


def test_convolutions_on_cuda_match_the_cpu():
    for cpu, cuda in zip(_conv_chain('cpu'), _conv_chain('cuda')):
        assert cuda.is_cuda
        torch.testing.assert_close(cuda.cpu(), cpu, rtol=1e-4, atol=1e-5)


def _unet_run(device: str, net: SparseUNet14, points, feats):
    net = copy.deepcopy(net).to(device)
    out = net(points.to(device), feats.to(device))
    out.square().mean().backward()
    return [out.detach()] + [p.grad for p in net.parameters()]


def test_sparse_unet_on_cuda_matches_the_cpu():
    torch.manual_seed(0)
    net = SparseUNet14(**SMALL_UNET)
    points = table_and_hemisphere(seed=1)
    feats = torch.rand(2, 3000, 3, generator=torch.Generator().manual_seed(2))
    cpu, cuda = _unet_run('cpu', net, points, feats), _unet_run('cuda', net, points, feats)
    torch.testing.assert_close(cuda[0].cpu(), cpu[0], rtol=1e-3, atol=1e-4)
    for a, b in zip(cuda[1:], cpu[1:]):
        # BatchNorm of small voxel sets amplifies rounding differences in the gradients
        torch.testing.assert_close(a.cpu(), b, rtol=1e-2, atol=1e-4)


def test_sparse_unet_bit_repeatable_under_deterministic_algorithms():
    torch.manual_seed(0)
    net = SparseUNet14(**SMALL_UNET)
    points = table_and_hemisphere(seed=3)
    feats = torch.rand(2, 3000, 3, generator=torch.Generator().manual_seed(4))
    torch.use_deterministic_algorithms(True)
    try:
        runs = [_unet_run('cuda', net, points, feats) for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b in zip(*runs):
        assert torch.equal(a, b)
