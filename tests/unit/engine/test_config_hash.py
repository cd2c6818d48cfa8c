"""The config hash: what changes it, what does not, and ConfigHashHook's resume check.

The hook runs on a stand-in runner here (it only reads ``runner.cfg`` and logs);
tests/integration/test_resume_mid_epoch.py runs it inside real trainings.
"""
import copy
import tempfile
from types import SimpleNamespace
from unittest import mock

import pytest
from mmengine.config import Config

from mmgrasp.engine.hooks import ConfigHashHook, canonical_config, config_diff, config_hash
from mmgrasp.registry import HOOKS


def make_cfg(grids=None, **top) -> Config:
    labels = dict(type='SampleGraspLabels', min_points=10)
    if grids is not None:
        labels['grids'] = grids
    return Config(dict(
        model=dict(type='GSNet', seed_points=1024),
        train_dataloader=dict(
            batch_size=4, num_workers=4, persistent_workers=True,
            sampler=dict(type='EpochAwareSampler', shuffle=True),
            dataset=dict(type='GraspNetDataset', data_root='data/graspnet', seed=0,
                         pipeline=[dict(type='LoadGraspScene'), labels,
                                   dict(type='PackGraspInputs')])),
        optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-3)),
        default_hooks=dict(logger=dict(type='LoggerHook', interval=10),
                           checkpoint=dict(type='CheckpointHook', interval=1)),
        env_cfg=dict(dist_cfg=dict(backend='nccl')),
        randomness=dict(seed=0),
        custom_hooks=[dict(type='ConfigHashHook')],
        **top))


def digest(cfg) -> str:
    return config_hash(cfg)[0]


def test_grids_is_part_of_the_run():
    assert digest(make_cfg('dense')) != digest(make_cfg('deferred'))
    # an omitted grids is the transform's default, made explicit
    assert digest(make_cfg()) == digest(make_cfg('deferred'))
    assert canonical_config(make_cfg())['train_dataloader']['dataset']['pipeline'][1][
        'grids'] == 'deferred'


def test_grids_counts_wherever_the_transform_sits():
    def nested(grids):
        cfg = make_cfg(grids)
        inner = cfg.train_dataloader.dataset
        cfg.train_dataloader.dataset = dict(type='ConcatDataset', datasets=[inner, inner])
        cfg.val_dataloader = dict(dataset=dict(pipeline=[
            dict(type='mmgrasp.SampleGraspLabels', grids=grids)]))
        return cfg

    assert digest(nested('dense')) != digest(nested('deferred'))
    dense = nested('dense')
    dense.val_dataloader.dataset.pipeline[0].pop('grids')
    assert digest(dense) != digest(nested('dense'))  # the val pipeline now defers
    assert digest(dense) != digest(nested('deferred'))


def test_same_config_same_hash_whatever_the_key_order():
    cfg = make_cfg('dense')
    reordered = Config(dict(reversed(list(copy.deepcopy(cfg.to_dict()).items()))))
    assert digest(cfg) == digest(make_cfg('dense')) == digest(reordered)
    assert len(digest(cfg)) == 64  # sha256


@pytest.mark.parametrize('key, value', [
    ('work_dir', 'elsewhere'), ('resume', True), ('load_from', 'x.pth'),
    ('load_from_partial', True), ('launcher', 'pytorch'), ('allow_config_mismatch', True),
    ('experiment_name', 'again'),
    ('log_level', 'DEBUG'), ('default_hooks.logger.interval', 1),
    ('default_hooks.checkpoint.interval', 100), ('env_cfg.dist_cfg.backend', 'gloo'),
    ('model_wrapper_cfg', dict(type='MMDistributedDataParallel', device_ids=None)),
    ('train_dataloader.num_workers', 0), ('train_dataloader.persistent_workers', False),
])
def test_ignored_keys_do_not_change_the_hash(key, value):
    cfg = make_cfg('deferred')
    cfg.merge_from_dict({key: value})
    assert digest(cfg) == digest(make_cfg('deferred'))


@pytest.mark.parametrize('key, value', [
    ('optim_wrapper.optimizer.lr', 2e-3), ('randomness.seed', 1),
    ('train_dataloader.batch_size', 2), ('train_dataloader.dataset.seed', 1),
    ('model.seed_points', 512), ('custom_hooks', []), ('runner_type', 'Runner'),
])
def test_run_defining_keys_change_the_hash(key, value):
    cfg = make_cfg('deferred')
    cfg.merge_from_dict({key: value})
    assert digest(cfg) != digest(make_cfg('deferred'))


def test_a_value_without_stable_text_is_refused():
    with pytest.raises(TypeError, match='model.head'):
        config_hash(dict(model=dict(head=object())))


def test_classes_hash_by_dotted_name():
    assert canonical_config(dict(type=ConfigHashHook)) == dict(
        type='mmgrasp.engine.hooks.config_hash_hook.ConfigHashHook')


def test_diff_names_the_changed_leaves():
    old = canonical_config(make_cfg('deferred'))
    new = canonical_config(make_cfg('dense', runner_type='Runner'))
    assert config_diff(old, new) == [
        "runner_type: (absent) -> 'Runner'",
        "train_dataloader.dataset.pipeline.1.grids: 'deferred' -> 'dense'"]


def runner(cfg: Config) -> SimpleNamespace:
    return SimpleNamespace(cfg=cfg, logger=mock.Mock(), work_dir=tempfile.mkdtemp(),
                           timestamp='stand-in')


def saved_checkpoint(cfg: Config) -> dict:
    hook = ConfigHashHook()
    checkpoint = dict(meta=dict(epoch=1), state_dict={})
    hook.before_run(runner(cfg))
    hook.before_save_checkpoint(runner(cfg), checkpoint)
    return checkpoint


def test_the_redacted_config_is_formatted_once_a_run(monkeypatch):
    """Each checkpoint carries the redacted config text; it is formatted (yapf, about 0.1 s) at
    the first save and the same text goes into every later one."""
    from mmgrasp.engine.hooks import config_hash_hook
    real, calls = config_hash_hook.redacted_config, []
    monkeypatch.setattr(config_hash_hook, 'redacted_config',
                        lambda cfg: calls.append(cfg) or real(cfg))
    hook, stand_in = ConfigHashHook(), runner(make_cfg('dense'))
    texts = []
    for epoch in (1, 2, 3):
        checkpoint = dict(meta=dict(epoch=epoch, cfg='the text mmengine formatted'))
        hook.before_save_checkpoint(stand_in, checkpoint)
        texts.append(checkpoint['meta']['cfg'])
    assert len(calls) == 1
    assert texts == [real(make_cfg('dense')).pretty_text] * 3


def test_hook_is_registered_with_high_priority():
    assert HOOKS.get('ConfigHashHook') is ConfigHashHook
    assert ConfigHashHook.priority == 'VERY_HIGH'


def test_checkpoint_carries_hash_and_canonical_text():
    checkpoint = saved_checkpoint(make_cfg('dense'))
    digest_, text = config_hash(make_cfg('dense'))
    assert checkpoint['meta']['config_hash'] == digest_
    assert checkpoint['meta']['hashed_config'] == text
    assert checkpoint['meta']['epoch'] == 1


def test_resume_under_the_same_config_passes():
    checkpoint = saved_checkpoint(make_cfg('deferred'))
    current = runner(make_cfg(resume=True, work_dir='other', experiment_name='b'))
    ConfigHashHook().after_load_checkpoint(current, checkpoint)
    current.logger.warning.assert_not_called()


def test_resume_under_another_config_names_both_hashes():
    checkpoint = saved_checkpoint(make_cfg('deferred'))
    current = make_cfg('dense', resume=True)
    with pytest.raises(RuntimeError) as error:
        ConfigHashHook().after_load_checkpoint(runner(current), checkpoint)
    message = str(error.value)
    assert checkpoint['meta']['config_hash'] in message and digest(current) in message
    assert 'differing top-level keys: train_dataloader\n' in message
    assert "train_dataloader.dataset.pipeline.1.grids: 'deferred' -> 'dense'" in message
    assert 'allow_config_mismatch=True' in message


def test_allow_config_mismatch_resumes_with_a_warning():
    checkpoint = saved_checkpoint(make_cfg('deferred'))
    current = runner(make_cfg('dense', resume=True, allow_config_mismatch=True))
    ConfigHashHook().after_load_checkpoint(current, checkpoint)
    (warning,), _ = current.logger.warning.call_args
    assert checkpoint['meta']['config_hash'] in warning and digest(current.cfg) in warning
    assert 'grids' in warning and 'allow_config_mismatch=True' in warning


def test_load_from_without_resume_is_not_checked():
    checkpoint = saved_checkpoint(make_cfg('deferred'))
    ConfigHashHook().after_load_checkpoint(runner(make_cfg('dense', load_from='x.pth')),
                                           checkpoint)


def test_checkpoint_without_hash_resumes_with_a_warning():
    current = runner(make_cfg('dense', resume=True))
    ConfigHashHook().after_load_checkpoint(current, dict(meta=dict(epoch=1)))
    assert 'no config hash' in current.logger.warning.call_args[0][0]
