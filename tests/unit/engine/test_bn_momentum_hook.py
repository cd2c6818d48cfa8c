"""BNMomentumHook inside a real mmengine training: graspnet-baseline's momentum per epoch on
every BatchNorm layer, and running statistics that follow it exactly (what is left of their
initial values after a short training, with the hook and with PyTorch's fixed 0.1)."""
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner

from mmgrasp.engine.hooks import BNMomentumHook

# a feature of small variance, as the coordinates (metres) a point backbone starts from
SCALE = 0.05


class _Net(BaseModel):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.head = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4),
                                        torch.nn.Linear(4, 1))
        self.momenta = []  # the momentum of each BatchNorm layer at each step

    def forward(self, inputs, targets=None, mode='tensor'):
        bns = [m for m in self.modules() if isinstance(m, torch.nn.BatchNorm1d)]
        self.momenta.append(tuple(m.momentum for m in bns))
        out = self.head(self.norm(self.linear(inputs)))
        if mode == 'loss':
            return dict(loss=((out[:, 0] - targets) ** 2).mean())
        return out


class _Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = SCALE * torch.tensor([i - 3.5, 1.0, 2.0 - 0.5 * i], dtype=torch.float32)
        return dict(inputs=x, targets=x.sum())


def _train(tmp_path, hooks, epochs, name):
    torch.manual_seed(0)
    runner = Runner(
        model=_Net(), work_dir=str(tmp_path / name),
        train_dataloader=dict(dataset=_Data(), batch_size=8, num_workers=0,
                              sampler=dict(type='DefaultSampler', shuffle=False),
                              collate_fn=dict(type='default_collate')),
        # lr 0 and one batch: the weights stay, so the batch statistics are the same each step
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.0)),
        train_cfg=dict(by_epoch=True, max_epochs=epochs), custom_hooks=hooks,
        default_hooks=dict(checkpoint=None), randomness=dict(seed=3), default_scope='mmgrasp',
        experiment_name=f'bn_momentum_{name}_{tmp_path.name}')
    runner.train()
    return runner.model


def test_momentum_follows_graspnet_baseline_schedule():
    hook = BNMomentumHook()  # graspnet-baseline's train.py: 0.5, halved every 2 epochs, >= 0.001
    assert [hook.momentum(e) for e in range(6)] == [0.5, 0.5, 0.25, 0.25, 0.125, 0.125]
    assert hook.momentum(17) == pytest.approx(0.5 ** 9)
    assert hook.momentum(30) == 0.001
    assert BNMomentumHook(step=1, minimum=0.1).momentum(10) == 0.1
    for bad in (dict(initial=1.5), dict(minimum=0.6), dict(minimum=0.0), dict(step=0)):
        with pytest.raises(ValueError, match='BNMomentumHook'):
            BNMomentumHook(**bad)


def test_hook_sets_every_layer_per_epoch_and_settles_the_statistics(tmp_path):
    """One step an epoch on the same batch with fixed weights: after the steps with momenta
    m_t, the running variance is f * 1 + (1 - f) * v, f = prod(1 - m_t) of the initial 1 left
    and v the batch variance."""
    model = _train(tmp_path, [dict(type='BNMomentumHook', step=1)], 3, 'hook')
    assert model.momenta == [(0.5, 0.5), (0.25, 0.25), (0.125, 0.125)]  # every layer, per epoch
    plain = _train(tmp_path, [], 3, 'plain')
    assert plain.momenta == [(0.1, 0.1)] * 3

    x = torch.stack([_Data()[i]['inputs'] for i in range(8)])
    with torch.no_grad():
        v = model.linear(x).var(0)  # unbiased, as BatchNorm's running variance
    assert torch.allclose(plain.linear(x).var(0), v)  # the same weights (same seed)
    for net, left in ((model, 0.5 * 0.75 * 0.875), (plain, 0.9 ** 3)):
        torch.testing.assert_close(net.norm.running_var, left + (1 - left) * v, rtol=1e-5,
                                   atol=1e-7)
    # the batch variance here is ~1e-3 (metre-scale inputs): what is left of the initial 1
    # dominates the running variance of a short training, less with the hook
    assert (v < 0.01).all()
    assert (model.norm.running_var < plain.norm.running_var).all()
