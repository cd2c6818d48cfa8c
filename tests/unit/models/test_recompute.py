"""``recomputed``: the plain call's values and gradients, inside the forward's autocast too; the
saved tensors are not kept; a region that saves other tensors when run again is refused. (The
models' own tests compare their recomputed regions with the kept formulations bit for bit.)"""
import pytest
import torch
from torch import nn

from mmgrasp.models.utils.live_bytes import LiveBytes
from mmgrasp.models.utils.recompute import recomputed, scratch_running_stats


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4))


@pytest.mark.parametrize('autocast', [False, True])
def test_same_values_gradients_and_statistics_as_the_plain_call(autocast):
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
    results = []
    for recompute in (False, True):
        net = _net()
        with torch.autocast('cpu', torch.bfloat16, enabled=autocast):
            y = (recomputed(net, x, context=lambda: scratch_running_stats(net)) if recompute
                 else net(x))
        y.float().square().sum().backward()
        results.append((y, [p.grad for p in net.parameters()], net.state_dict()))
    (y, grads, state), (y_r, grads_r, state_r) = results
    assert y.dtype == y_r.dtype == (torch.bfloat16 if autocast else torch.float32)
    assert torch.equal(y, y_r) and all(map(torch.equal, grads, grads_r))
    assert int(state_r['1.num_batches_tracked']) == 1  # updated once, not again when recomputed
    assert all(torch.equal(v, state_r[k]) for k, v in state.items())


def test_saved_tensors_are_dropped_until_the_backward_pass():
    net, x = _net(), torch.randn(4096, 8)
    kept = []
    for recompute in (False, True):
        with LiveBytes() as counter:
            start = counter.live
            y = recomputed(net, x) if recompute else net(x)
            kept.append(counter.live - start - y.untyped_storage().nbytes())
            del y
    assert kept[1] < 0.1 * kept[0]  # (4096, 64) activations of two layers kept without it


def test_a_region_that_saves_other_tensors_when_run_again_is_refused():
    calls = []
    w = torch.randn(4, requires_grad=True)

    def region(x):
        calls.append(1)
        return (w * x).sin() if len(calls) == 1 else w * x  # sin saves one more tensor

    y = recomputed(region, torch.randn(4))
    with pytest.raises(RuntimeError, match='region saved 1 tensors when recomputed, 2 in the forward'):
        y.sum().backward()
