import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from mmgrasp.ops.kernel_scope import kernel_scope, parse_kernel_scope


def test_scope_is_a_profiler_range_that_names_its_launches():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with kernel_scope('fps', 3):
            torch.ones(4).add_(1)
    names = [e.name for e in prof.events()]
    scopes = [parse_kernel_scope(n) for n in names if parse_kernel_scope(n)]
    assert scopes == [('fps', 3)]
    assert parse_kernel_scope('aten::add_') is None


@pytest.mark.parametrize('name, launches', [('a::b', 1), ('fps', -1)])
def test_bad_scopes_are_refused(name, launches):
    with pytest.raises(ValueError, match=name.replace(':', '.')):
        with kernel_scope(name, launches):
            pass
