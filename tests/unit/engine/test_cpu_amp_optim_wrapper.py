"""CPUAmpOptimWrapper: the forward pass under its context runs matrix products in bfloat16,
the update leaves float32 weights, and it refuses any other dtype."""
import pytest
import torch
from torch import nn

from mmgrasp.engine.optimizers import CPUAmpOptimWrapper


def test_forward_in_bfloat16_update_in_float32():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    before = model.weight.detach().clone()
    wrapper = CPUAmpOptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    x = torch.randn(5, 4)
    with wrapper.optim_context(model):
        out = model(x)
    assert out.dtype == torch.bfloat16
    assert model(x).dtype == torch.float32  # outside the context: plain float32
    loss = out.float().square().mean()
    wrapper.update_params(loss)
    assert model.weight.dtype == torch.float32 and torch.isfinite(model.weight).all()
    assert not torch.equal(before, model.weight)


def test_only_bfloat16():
    with pytest.raises(ValueError, match='bfloat16 only'):
        CPUAmpOptimWrapper(dtype='float16', optimizer=torch.optim.SGD([nn.Parameter(
            torch.zeros(1))], lr=0.1))
