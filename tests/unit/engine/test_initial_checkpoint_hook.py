"""InitialCheckpointHook inside a real mmengine training: epoch_0.pth holds the weights the
first step starts from, and a resumed run leaves it alone."""
import os

import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner

from mmgrasp.engine.hooks import InitialCheckpointHook


class _Regressor(BaseModel):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, inputs, targets=None, mode='tensor'):
        out = self.linear(inputs)  # default_collate stacks the batch
        if mode == 'loss':
            return dict(loss=((out[:, 0] - targets) ** 2).mean())
        return out


class _Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.tensor([i, 1.0, -i], dtype=torch.float32)
        return dict(inputs=x, targets=x.sum())


def _runner(work_dir, epochs, resume=False):
    return Runner(
        model=_Regressor(), work_dir=str(work_dir),
        train_dataloader=dict(dataset=_Data(), batch_size=4, num_workers=0,
                              sampler=dict(type='DefaultSampler', shuffle=False),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=epochs),
        custom_hooks=[dict(type='InitialCheckpointHook')],
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
        randomness=dict(seed=3), resume=resume, default_scope='mmgrasp',
        # unique: the default scope and other Runner singletons are keyed by the experiment
        # name, by default the timestamp, which a Runner of another test may share
        experiment_name=f'initial_checkpoint_{work_dir.name}_{int(resume)}')


def test_epoch_0_is_the_starting_weights(tmp_path):
    runner = _runner(tmp_path, 1)
    start = {k: v.clone() for k, v in runner.model.state_dict().items()}
    runner.train()
    init = torch.load(tmp_path / 'epoch_0.pth', weights_only=False)
    assert init['meta']['epoch'] == 0 and init['meta']['iter'] == 0
    assert 'optimizer' not in init
    for k, v in start.items():
        assert torch.equal(init['state_dict'][k], v), k
    trained = torch.load(tmp_path / 'epoch_1.pth', weights_only=False)['state_dict']
    assert not torch.equal(trained['linear.weight'], start['linear.weight'])
    # resuming (iteration 2 of 4) keeps the first start's file
    stamp = os.stat(tmp_path / 'epoch_0.pth').st_mtime_ns
    _runner(tmp_path, 2, resume=True).train()
    assert os.stat(tmp_path / 'epoch_0.pth').st_mtime_ns == stamp
    assert os.path.isfile(tmp_path / 'epoch_2.pth')
    assert repr(InitialCheckpointHook()) == "InitialCheckpointHook(filename='epoch_0.pth')"
