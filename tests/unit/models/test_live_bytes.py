"""LiveBytes counts exactly the bytes of the live tensor storages: known allocations give known
peaks per part, views and in-place ops add nothing, a freed storage is subtracted, adopted
storages are counted once, and a kernel scope is charged only the outputs that survive it."""
import torch

from mmgrasp.models.utils import PartTimer
from mmgrasp.ops.kernel_scope import kernel_scope
from mmgrasp.models.utils.live_bytes import LiveBytes

KB = 4000  # bytes of 1 000 float32


def test_peaks_per_part_follow_allocations_and_frees():
    timer = PartTimer()
    weight = torch.ones(1000, requires_grad=True)
    with LiveBytes() as counter:
        counter.adopt([weight, {'again': weight}])  # counted once
        assert counter.live == KB
        with timer('backbone'):
            a = torch.ones(1000)
            b = a * 2  # weight, a, b
            a.add_(1)  # in place: no new storage
            view = b[10:].view(-1, 10)  # a view: none either
            del a
        with timer('head'):
            c = torch.empty(4000)  # weight, b, c
            del c
            d = (weight * b).sum()  # weight, b, the product (freed), d
        d.backward()  # the gradient of weight
    assert counter.peaks['backbone'] == 3 * KB
    assert counter.peaks['head'] == 2 * KB + 4 * KB
    assert counter.peak == 6 * KB
    assert counter.live == 3 * KB + 4 and view.shape == (99, 10)  # weight, b, its grad, d


def test_kernel_scope_is_charged_its_surviving_outputs_only():
    with LiveBytes() as counter:
        with kernel_scope('fps', 1):
            scratch = torch.ones(10_000)  # the torch reference's temporary
            out = torch.zeros(1000)
            del scratch
        assert counter.live == KB
        with kernel_scope('outer', 1):
            with kernel_scope('inner', 1):
                inner = torch.ones(1000)
            assert counter.live == KB  # the outer scope decides
        assert counter.live == 2 * KB
    assert counter.peak == 2 * KB and out.numel() and inner.numel()


def test_storages_of_other_devices_are_ignored():
    with LiveBytes(torch.device('meta')) as counter:
        torch.ones(1000)
    assert counter.peak == 0
