"""SparseUNet14: shapes, gradients, CPU determinism, registry."""
import torch

from _sparse_inputs import SMALL_UNET, table_and_hemisphere
from mmgrasp.models.backbones.sparse_unet import SparseUNet14
from mmgrasp.registry import MODELS


def test_forward_shape_and_gradients():
    torch.manual_seed(0)
    net = MODELS.build(dict(type='SparseUNet14', **SMALL_UNET))
    assert isinstance(net, SparseUNet14)
    points = table_and_hemisphere()
    out = net(points)
    assert out.shape == (2, 24, 3000) and out.is_contiguous()
    out.square().mean().backward()
    for name, param in net.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    # Points sharing a voxel share features.
    cells, inverse, counts = torch.unique(torch.floor(points[0] / net.voxel_size).long(), dim=0,
                                          return_inverse=True, return_counts=True)
    same = (inverse == counts.argmax()).nonzero().squeeze(1)
    assert len(same) > 1
    assert torch.equal(out[0, :, same], out[0, :, same[:1]].expand(-1, len(same)))


def test_deterministic_on_cpu():
    points = table_and_hemisphere(seed=1)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        net = SparseUNet14(**SMALL_UNET)
        out = net(points, torch.ones(2, 3000, 3))
        out.square().mean().backward()
        runs.append((out.detach(), [p.grad for p in net.parameters()]))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))


def test_eval_mode_and_default_channels():
    net = SparseUNet14(layers=(1, 1, 1, 1, 1, 1, 1, 1)).eval()
    assert net.head.out_channels == 512 and net.stem[0].kernel_size == 5
    with torch.no_grad():
        out = net(table_and_hemisphere(batch=1, n=500))
    assert out.shape == (1, 512, 500) and torch.isfinite(out).all()


def test_runs_under_autocast():
    """Mixed precision (here CPU bfloat16) leaves the sparse convs in float32."""
    net = SparseUNet14(**SMALL_UNET)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = net(table_and_hemisphere(batch=1, n=800))
    assert out.dtype == torch.float32
    out.square().mean().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in net.parameters())
