"""GraspDetector.parse_losses gives what mmengine's BaseModel.parse_losses gives (the same
logged terms in the same order, the same gradients, the total to the last bit or one ulp) with
two launches for the total instead of two per term."""
import pytest
import torch
from mmengine.model import BaseModel
from torch.profiler import ProfilerActivity, profile

from mmgrasp.analysis import dispatch_count
from mmgrasp.models.detectors.base import GraspDetector


def _losses(seed=0):
    g = torch.Generator().manual_seed(seed)
    leaves = [torch.rand((), generator=g).mul(10).requires_grad_() for _ in range(7)]
    losses = {f'loss_{i}': v * (i + 1) for i, v in enumerate(leaves)}
    losses['acc'] = leaves[0] * 0 + 0.5  # logged, not summed (no 'loss' in the name)
    losses['loss_map'] = leaves[1] * torch.ones(3)  # a non-scalar term: its mean
    return leaves, losses


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_equals_mmengines_parse_losses(seed):
    leaves, losses = _losses(seed)
    ours, ours_vars = GraspDetector.parse_losses(None, losses)
    theirs, their_vars = BaseModel.parse_losses(None, losses)
    assert list(ours_vars) == list(their_vars)
    for k in their_vars:
        assert torch.allclose(ours_vars[k], their_vars[k], rtol=1.2e-7, atol=0), k
    grads = torch.autograd.grad(ours, leaves, retain_graph=True)
    expected = torch.autograd.grad(theirs, leaves)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected))
    # a mutant that also sums the logged-only term is told apart
    assert not torch.allclose(ours + losses['acc'], theirs)


def test_the_total_costs_two_launches():
    _, losses = _losses()
    del losses['loss_map']
    counts = {}
    for name, parse in (('ours', GraspDetector.parse_losses),
                        ('mmengine', BaseModel.parse_losses)):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            parse(None, losses)
        parts = dispatch_count.count_events(prof.events())
        counts[name] = sum(p['launches'] for p in parts.values())
    assert counts['ours'] == 2 and counts['mmengine'] >= 2 * 7, counts
