"""The numerics are model config keys: ``model.point_ops`` and the sparse U-Net's
``model.backbone.conv_algorithm`` each change what runs, change the config hash, are logged
when the model is built, and an ``auto`` that falls back warns once saying why."""
import copy
import os
import warnings
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmgrasp.engine.hooks.config_hash_hook import config_hash
from mmgrasp.ops import numerics, point_ops
from mmgrasp.ops.sparse_conv import _SparseConvBase
from mmgrasp.registry import MODELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def _config(name: str = 'gsnet_demo.py') -> Config:
    return Config.fromfile(os.path.join(REPO, 'configs', name))


def _build(model_cfg: dict):
    init_default_scope('mmgrasp')
    torch.manual_seed(0)
    return MODELS.build(copy.deepcopy(model_cfg))


@pytest.mark.parametrize('name', ['gsnet_deferred.py', 'graspnet_baseline_deferred.py',
                                  'scale_balanced_deferred.py'])
def test_the_recipes_carry_the_keys_and_the_hash_follows_them(name):
    cfg = _config(name)
    assert cfg.model.point_ops == 'auto'
    keys = [('point_ops', 'torch')]
    if cfg.model.backbone.type == 'SparseUNet14':
        assert cfg.model.backbone.conv_algorithm == 'auto'
        keys.append(('backbone.conv_algorithm', 'pairs'))
    base, _ = config_hash(cfg)
    for key, value in keys:
        changed = copy.deepcopy(cfg)
        changed.merge_from_dict({f'model.{key}': value})
        assert config_hash(changed)[0] != base, key


def test_point_ops_chooses_what_the_forward_runs(monkeypatch):
    """'triton' calls the kernels module (here a recording stand-in running the references),
    'torch' and 'auto' on CPU tensors do not; outside a forward the default is 'auto'."""
    calls = []

    class Kernels:
        @staticmethod
        def furthest_point_sample(xyz, num, mask=None):
            calls.append('fps')
            with numerics.point_ops_backend('torch'):
                return point_ops.furthest_point_sample(xyz, num, mask)

    monkeypatch.setattr(point_ops, 'triton_kernels', lambda: Kernels)
    cfg = _config()
    points = torch.rand(2, 400, 3, generator=torch.Generator().manual_seed(0)) * 0.2
    seeds = {}
    for choice in ('torch', 'auto', 'triton'):
        model = _build(dict(cfg.model, point_ops=choice)).eval()
        calls.clear()
        with torch.no_grad():
            seeds[choice] = model(dict(points=points), mode='tensor')['seeds']
        assert calls == (['fps'] if choice == 'triton' else []), choice
    assert torch.equal(seeds['torch'], seeds['triton'])
    assert numerics.current_point_ops() == 'auto'
    with pytest.raises(ValueError, match="point_ops='cuda'"):
        _build(dict(cfg.model, point_ops='cuda'))


def test_conv_algorithm_reaches_every_sparse_conv_layer():
    cfg = _config()
    for choice in ('pairs', 'chunked_im2col', 'auto'):
        model = _build(dict(cfg.model, backbone=dict(cfg.model.backbone,
                                                     conv_algorithm=choice)))
        layers = [m for m in model.modules() if isinstance(m, _SparseConvBase)]
        assert layers and all(layer.algorithm == choice for layer in layers)
    with pytest.raises(ValueError, match="algorithm='gemm'"):
        _build(dict(cfg.model, backbone=dict(cfg.model.backbone, conv_algorithm='gemm')))


def test_the_numerics_are_logged_when_the_model_is_built(monkeypatch):
    lines = []
    monkeypatch.setattr(numerics, 'print_log', lambda msg, **kw: lines.append(msg))
    cfg = _config()
    _build(dict(cfg.model, point_ops='torch'))
    assert lines == ["GSNet: point_ops='torch'", "SparseUNet14: backend='torch', "
                     "conv_algorithm='auto' (chunked_im2col on CUDA, pairs on the CPU)"]


def test_auto_without_triton_on_cuda_warns_once_why(monkeypatch):
    monkeypatch.setattr(point_ops, 'triton_kernels', lambda: None)
    monkeypatch.setattr(point_ops, '_TRITON_MISSING', ["ModuleNotFoundError: No module named "
                                                       "'triton'"])
    monkeypatch.setattr(point_ops, '_WARNED', [])
    cuda_tensor = SimpleNamespace(is_cuda=True)  # _kernels_for reads only the device
    with pytest.warns(RuntimeWarning, match=r"runs the torch references .*No module named "
                                            r"'triton'"):
        assert point_ops._kernels_for(cuda_tensor) is None
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert point_ops._kernels_for(cuda_tensor) is None  # once
    with numerics.point_ops_backend('triton'), pytest.raises(ImportError, match='triton'):
        point_ops._kernels_for(cuda_tensor)


def test_auto_is_explained_only_where_it_applies(monkeypatch):
    """The spconv backend has no conv algorithm: its U-Net logs conv_algorithm='auto' bare."""
    lines = []
    monkeypatch.setattr(numerics, 'print_log', lambda msg, **kw: lines.append(msg))
    numerics.log_choices('SparseUNet14', auto_applies=False, backend='spconv',
                         conv_algorithm='auto')
    numerics.log_choices('GSNet', point_ops='triton')
    assert lines == ["SparseUNet14: backend='spconv', conv_algorithm='auto'",
                     "GSNet: point_ops='triton'"]
