"""GSNet under CUDA mixed precision (mmengine's AmpOptimWrapper, float16, dynamic loss scale):
float32 losses and master weights, finite gradients, and a step that changes the weights. The
CPU's bfloat16 counterpart is tests/integration/test_amp_training.py."""
import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.optim import AmpOptimWrapper

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]


@pytest.mark.parametrize('grids', ['dense', 'deferred'])
def test_gsnet_float16_step(make_dataset, tiny_gsnet, grids):
    dataset = make_dataset(grids)
    model = tiny_gsnet().cuda()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    wrapper = AmpOptimWrapper(optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
                              loss_scale='dynamic')
    for _ in range(2):  # a first step may be skipped while the loss scale settles
        with wrapper.optim_context(model):
            data = model.data_preprocessor(pseudo_collate([dataset[0], dataset[4]]), True)
            losses = model(**data, mode='loss')
        assert all(v.dtype == torch.float32 and torch.isfinite(v) for v in losses.values())
        wrapper.update_params(sum(losses.values()))
    for name, param in model.named_parameters():
        assert param.dtype == torch.float32 and torch.isfinite(param).all(), name
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
