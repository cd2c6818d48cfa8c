"""No secret of a config reaches the config hash, the checkpoint or the dumped config, and a
remote store refuses credentials in its options (they come from the environment)."""
import glob
import os

import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner

from mmgrasp.engine.hooks import canonical_config, config_hash
from mmgrasp.storage import LabelStoreError, open_remote_label_store

SECRET, KEY_ID = 'wJalrXUtnFEMI-K7MDENG-secret', 'AKIAIOSFODNN7EXAMPLE'
TOKEN = 'FQoGZXIvYXdzE-token'
REMOTE = dict(gap=4096, storage_options=dict(
    access_key_id=KEY_ID, secret_access_key=SECRET, endpoint='http://127.0.0.1:9',
    aws_session_token=TOKEN))


class _Line(BaseModel):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, inputs, mode='loss'):
        return dict(loss=((self.w - inputs) ** 2).mean())


def _assert_no_secret(text: str, where: str) -> None:
    for secret in (SECRET, KEY_ID, TOKEN):
        assert secret not in text, f'{where} holds {secret}'


def test_hash_input_is_redacted_and_ignores_the_secret():
    cfg = dict(model=dict(type='X'), remote=REMOTE)
    digest, text = config_hash(cfg)
    _assert_no_secret(text, 'the hashed config')
    assert canonical_config(cfg)['remote']['storage_options'][
        'endpoint'] == 'http://127.0.0.1:9'  # what is not a secret stays
    other = dict(remote=dict(REMOTE, storage_options=dict(REMOTE['storage_options'],
                                                          secret_access_key='x')))
    assert config_hash(dict(model=dict(type='X'), **other))[0] == digest


def test_checkpoint_and_dumped_config_hold_no_secret(tmp_path):
    runner = Runner(
        model=_Line(), work_dir=str(tmp_path / 'work'),
        train_dataloader=dict(dataset=[dict(inputs=torch.ones(1))] * 4, batch_size=2,
                              sampler=dict(type='DefaultSampler', shuffle=False),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_cfg=dict(by_epoch=True, max_epochs=2),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
        custom_hooks=[dict(type='mmgrasp.ConfigHashHook')],
        experiment_name=f'secrets_{tmp_path.name}',  # Runner singletons are keyed by it
        cfg=dict(remote=REMOTE, model=dict(type='_Line')))
    runner.train()
    for epoch in (1, 2):  # the second save reuses the first's redacted text
        checkpoint = torch.load(os.path.join(runner.work_dir, f'epoch_{epoch}.pth'),
                                weights_only=False)
        _assert_no_secret(repr(checkpoint['meta']), 'the checkpoint meta')
        assert '<redacted>' in checkpoint['meta']['cfg'] and \
            'gap=4096' in checkpoint['meta']['cfg']
    dumped = glob.glob(os.path.join(runner.work_dir, '*.py'))
    assert dumped
    for path in dumped:
        with open(path) as f:
            _assert_no_secret(f.read(), path)


@pytest.mark.parametrize('name', ['secret', 'key', 'password', 'aws_secret_access_key',
                                  'aws_session_token', 'azure_storage_sas_key',
                                  'sse_customer_key_base64', 'encryption_key'])
def test_remote_store_refuses_credentials_in_its_options(tmp_path, name):
    options = dict(storage_options={name: 'x', 'endpoint': 'http://127.0.0.1:9'})
    with pytest.raises(LabelStoreError, match=f'storage_options.{name} looks like a credential'
                                              f'.*AWS_ACCESS_KEY_ID'):
        open_remote_label_store('s3://bucket/store', str(tmp_path), options)


def test_tools_refuse_a_config_with_credentials_before_the_runner_logs_it(tmp_path):
    """mmengine's Runner prints the whole config in its constructor, before any hook exists:
    tools/train.py and tools/test.py refuse a secret-looking option first, naming it."""
    from mmengine.config import Config

    from mmgrasp.apis import apply_cli_options
    cfg = Config(dict(train_dataloader=dict(dataset=dict(pipeline=[dict(
        type='SampleGraspLabels', store_url='s3://bucket/store',
        storage_options=dict(skip_signature=False, secret_access_key=SECRET))]))))
    with pytest.raises(SystemExit) as err:
        apply_cli_options(cfg, 'my_config.py', None, str(tmp_path))
    assert 'storage_options.secret_access_key' in str(err.value) and 'wJalrX' not in str(err.value)
    clean = Config(dict(train_dataloader=dict(dataset=dict(pipeline=[dict(
        type='SampleGraspLabels', remote=dict(storage_options=dict(skip_signature=True)))]))))
    assert apply_cli_options(clean, 'my_config.py', None, str(tmp_path)).work_dir == str(tmp_path)
    with pytest.raises(SystemExit, match='password'):
        apply_cli_options(clean, 'my_config.py', {'env_cfg.password': 'x'}, str(tmp_path))
