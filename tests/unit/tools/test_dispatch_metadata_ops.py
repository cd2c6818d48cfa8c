"""Ops that only change a tensor's metadata or query the build launch nothing, on any device:
the launch counter (mmgrasp.analysis.dispatch_count) charges them 0 (in-place squeeze_ /
unsqueeze_, which max/min reductions call on their outputs; _nnpack_available, which every
convolution queries to choose its algorithm), and still charges a real in-place op."""
import torch
from torch.profiler import ProfilerActivity, profile

from mmgrasp.analysis import dispatch_count as dispatch


def _launches(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(p['launches'] for p in dispatch.count_events(prof.events()).values())


def test_metadata_ops_launch_nothing():
    x = torch.ones(3, 1)
    assert _launches(lambda: x.squeeze_(1).unsqueeze_(1)) == 0
    assert _launches(torch._nnpack_available) == 0
    assert _launches(lambda: x.add_(1)) == 1  # a real in-place op still counts


def test_max_over_a_dim_is_one_launch():
    x = torch.rand(4, 5, 6)
    assert _launches(lambda: x.max(dim=2)) == 1
