"""The chunked im2col product of the sparse convolution: its peak live bytes are bounded
(counted, not timed), its values are the unchunked product's, and the layers' ``algorithm``
changes what runs."""
import pytest
import torch

from mmgrasp.ops import SparseConv3d, voxelize
from mmgrasp.ops import sparse_conv


def _two_level_set(seed: int):
    gen = torch.Generator().manual_seed(seed)
    points = torch.rand(2, 3000, 3, generator=gen) * torch.tensor([0.3, 0.3, 0.05])
    x, _ = voxelize(points, 0.01, levels=1)
    return x.replace(torch.randn(len(x.coords), 8, generator=gen))


def _recorded_ops(conv, x):
    from torch.profiler import ProfilerActivity, profile
    conv(x)  # the kernel map, built once
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        conv(x).feats.sum().backward()
    return {event.name for event in prof.events()}


@pytest.mark.parametrize('name', ['chunked_im2col', 'pairs', 'auto'])
def test_each_algorithm_runs_what_it_names(name):
    """The layers' option has a consumer: the im2col product is matmuls into the output's rows
    (``mm``, ``addmm_``), the pairs product an ``index_add_`` per offset; ``auto`` on the CPU
    is ``pairs``."""
    x = _two_level_set(seed=2)
    ops = _recorded_ops(SparseConv3d(8, 4, 3, algorithm=name), x)
    pairs = name != 'chunked_im2col'
    assert ('aten::index_add_' in ops) == pairs
    assert ('aten::mm' in ops and 'aten::index_select' in ops) or pairs


def _live_peak(step):
    from mmgrasp.models.utils.live_bytes import LiveBytes
    with LiveBytes() as counter:
        start = counter.live
        step()
    return counter.peak - start


def test_chunked_im2col_bounds_its_peak_and_equals_the_unchunked_product(monkeypatch):
    """Counted, not timed: one forward and backward of a 3³ convolution holds at most one
    im2col chunk at a time beside its inputs and outputs, while the unchunked product holds
    the whole (N, 27 * C_in) matrix; both give the same values (each row's product and the
    input gradient are the same sums; the weight gradient adds the chunks in row order)."""
    x = _two_level_set(seed=5)
    x = x.replace(x.feats.repeat(1, 4))  # 32 channels: the matrix dominates the counted bytes
    conv = SparseConv3d(32, 32, 3, algorithm='chunked_im2col')
    conv(x)  # the kernel map and its inverse table stay cached: not part of what is counted
    n, width = len(x.coords), 27 * 32
    matrix = n * width * 4

    def step():
        feats = x.feats.clone().requires_grad_()
        out = conv(x.replace(feats))
        out.feats.square().sum().backward()
        return out.feats.detach(), feats.grad, conv.weight.grad.clone()

    step()  # builds the inverse table
    conv.weight.grad = None
    results, peaks = {}, {}
    for chunk in (width * 64, 1 << 40):  # 64 rows a chunk; one chunk
        monkeypatch.setattr(sparse_conv, 'IM2COL_CHUNK_ELEMENTS', chunk)
        peaks[chunk] = _live_peak(step)
        results[chunk] = step()
        conv.weight.grad = None
    small, whole = peaks[width * 64], peaks[1 << 40]
    # inputs, outputs and gradients: the padded features and output gradient, the clone of
    # the features, the output, its square, both feature gradients, the weight gradient and
    # the transposed weight (all (N, 32) or (27 * 32, 32) float32), and 2 chunks
    others = 10 * (n + 1) * 32 * 4 + 3 * width * 32 * 4
    assert small <= others + 2 * 64 * width * 4 < matrix <= whole
    for a, b in zip(results[width * 64], results[1 << 40]):
        assert torch.isfinite(a).all() and a.abs().max() > 0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6 * float(a.abs().max()))
