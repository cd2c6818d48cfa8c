"""backend='spconv' on CUDA, where it trains: forward and gradients against backend='torch' on
the same device (each layer kind, the whole SparseUNet14) and a GSNet training step. Skips
without CUDA, or without spconv's CUDA wheel (``spconv-cu12x``: too large to carry to a bare
device machine in .whl/; tools/analysis/device_check.sh reports such skips by name)."""
import os

import pytest
import torch

from _sparse_inputs import SMALL_UNET, table_and_hemisphere
from mmgrasp.models.backbones.sparse_unet import SparseUNet14
from mmgrasp.ops import SparseConv3d, SparseConvTranspose3d, voxelize
from mmgrasp.registry import MODELS, build_in_scope

#: The skip reason device_check.sh recognises (a GPU machine without the CUDA wheel).
NO_CUDA_SPCONV = 'spconv-cu12x not installed'


def _cuda_spconv_missing() -> bool:
    try:
        from spconv.cppconstants import CPU_ONLY_BUILD
    except ImportError:
        return True
    return CPU_ONLY_BUILD


pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device'),
    pytest.mark.skipif(torch.cuda.is_available() and _cuda_spconv_missing(),
                       reason=f'{NO_CUDA_SPCONV} (pip install spconv-cu126, or the wheel of '
                              f'this CUDA; the CPU wheel cannot run CUDA tensors)'),
]


@pytest.fixture(autouse=True)
def _full_float32(monkeypatch):
    """TF32 off for the torch backend's matmuls (spconv's float32 kernels accumulate in
    float32)."""
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', os.environ.get('CUBLAS_WORKSPACE_CONFIG',
                                                                 ':4096:8'))
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def _close(got: torch.Tensor, expected: torch.Tensor, name: str) -> None:
    scale = float(expected.abs().max())
    assert scale > 0, name
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=2e-3 * scale, msg=name)


def _layers(backend: str):
    torch.manual_seed(0)
    return [SparseConv3d(4, 8, 5, backend=backend), SparseConv3d(8, 8, 3, dilation=2,
                                                                  backend=backend),
            SparseConv3d(8, 16, 2, stride=2, backend=backend),
            SparseConv3d(16, 16, 3, backend=backend),
            SparseConvTranspose3d(16, 8, 2, stride=2, bias=True, backend=backend)]


def _run_layers(backend: str):
    layers = [layer.cuda() for layer in _layers(backend)]
    torch.nn.init.normal_(layers[-1].bias)
    feats = torch.randn(2, 2000, 4, generator=torch.Generator().manual_seed(1)).cuda()
    feats.requires_grad_(True)
    x, _ = voxelize(table_and_hemisphere(n=2000).cuda(), 0.01, feats)
    fine = layers[1](layers[0](x))
    coarse = layers[3](layers[2](fine))
    out = layers[4](coarse.replace(coarse.feats.relu()), fine)
    assert out.coords is fine.coords
    (out.feats * torch.linspace(-1, 1, out.feats.numel(), device=out.feats.device).view_as(out.feats)) \
        .sum().backward()
    return out.feats.detach(), feats.grad, [layer.weight.grad for layer in layers]


def test_layers_forward_and_gradients_match_torch():
    (out_t, grad_t, weights_t), (out_s, grad_s, weights_s) = map(_run_layers, ('torch',
                                                                                'spconv'))
    _close(out_s, out_t, 'features')
    _close(grad_s, grad_t, 'input gradient')
    for i, (got, expected) in enumerate(zip(weights_s, weights_t)):
        _close(got, expected, f'weight gradient of layer {i}')


def test_unet_trains_like_torch():
    points = table_and_hemisphere(n=3000).cuda()
    results = {}
    for backend in ('torch', 'spconv'):
        torch.manual_seed(0)
        net = SparseUNet14(**SMALL_UNET, backend=backend).cuda().train()
        out = net(points)
        out.square().mean().backward()
        results[backend] = out.detach(), {n: p.grad for n, p in net.named_parameters()}
    (out_t, grads_t), (out_s, grads_s) = results['torch'], results['spconv']
    _close(out_s, out_t, 'features')
    for name, expected in grads_t.items():
        _close(grads_s[name], expected, name)


def test_gsnet_training_step_on_spconv(make_dataset):
    from mmengine.dataset import pseudo_collate
    torch.manual_seed(0)
    model = build_in_scope(MODELS, dict(
        type='GSNet', num_seeds=64, num_views=5, num_angles=3, num_depths=3,
        backbone=dict(type='SparseUNet14', channels=(8, 8, 16, 16, 16, 8, 8, 8),
                      out_channels=32, backend='spconv'),
        crop=dict(channels=(32, 32)),
        assigner=dict(type='NearestLabelAssigner', num_views=5))).cuda()
    dataset = make_dataset('deferred', num_points=1200)
    data = model.data_preprocessor(pseudo_collate([dataset[i] for i in (0, 4)]), True)
    losses = model(**data, mode='loss')
    assert all(torch.isfinite(v) for v in losses.values())
    sum(losses.values()).backward()
    missing = [n for n, p in model.backbone.named_parameters() if not p.grad.abs().sum() > 0]
    assert not missing
