"""tools/model_converters/reference_to_mmgrasp.py on EconomicGrasp's official checkpoint layout
(tests/data/reference_state_dicts/economicgrasp.json, derived from the reference model code
@7361bb6: state-dict keys and shapes as ``economicgrasp(seed_feat_dim=512)`` has them, ME
kernels (k³, C_in, C_out), ME biases (1, C)).

The round trip writes a small mmgrasp model into that layout with an inverse written here
(the backbone through test_model_converters' GSNet inverse, which matches ME kernel offsets
one by one), converts it back and compares the predictions.
"""
import json
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import load_checkpoint

from mmgrasp.registry import MODELS, build_in_scope
from test_model_converters import _gsnet_key, converter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'economicgrasp.json')
MODEL_CONFIG = os.path.join(REPO, 'configs', '_base_', 'models', 'economicgrasp.py')


def build(**overrides):
    cfg = Config.fromfile(MODEL_CONFIG)
    cfg.merge_from_dict(dict(model=overrides))
    return build_in_scope(MODELS, cfg.model)


def small_model(seed: int):
    torch.manual_seed(seed)
    model = build(num_seeds=32, num_views=20, backbone=dict(
        channels=(8, 8, 16, 16, 16, 8, 8, 8), out_channels=16),
        crop=dict(channels=(16, 16), channels2=(16, 8)), head=dict(embed_channels=8),
        test_cfg=dict(collision_thresh=0.0))
    for name, buf in model.named_buffers():  # non-trivial BN statistics
        if name.endswith('running_mean'):
            buf.normal_(0, 0.1)
        elif name.endswith('running_var'):
            buf.uniform_(0.5, 1.5)
    return model.eval()


_ATTENTION = {'query': 'msa.linears.0', 'key': 'msa.linears.1', 'value': 'msa.linears.2',
              'out': 'msa.linears.3', 'norm': 'norm1'}


def to_reference(state: dict) -> dict:
    out = {}
    for key, value in state.items():
        module, tail = key.rsplit('.', 1)
        parts = module.split('.')
        if parts[0] == 'backbone':
            ref_key, value = _gsnet_key(key, value)
        elif parts[0] == 'graspable_head':
            ref_key = f'graspable.conv_graspable.{tail}'
        elif parts[0] == 'approach_head':
            ref_key = f'view.{parts[1]}.{tail}'
        elif parts[0] == 'crop' and parts[1] in ('mlp', 'mlp2'):
            i = int(parts[2])
            ref_key = (f'cy_group.{"mlps" if parts[1] == "mlp" else "mlps2"}.layer{i // 3}.'
                       f'{"conv" if i % 3 == 0 else "bn.bn"}.{tail}')
        elif parts[1] == 'attention':
            owner = ('cy_group.local_interaction_module' if parts[0] == 'crop' else
                     'grasp_head.global_interaction_module')
            ref_key = f'{owner}.{_ATTENTION[parts[2]]}.{tail}'
        elif parts[1] == 'embeddings':
            ref_key = f'grasp_head.conv_{parts[2]}_feature.{tail}'
        elif parts[1] == 'outputs':
            ref_key = f'grasp_head.conv_{parts[2]}.{tail}'
        else:
            raise AssertionError(f'test inverse does not know {key}')
        out[ref_key] = value.clone()
    return out


def reference_layout() -> dict:
    with open(TABLE) as f:
        return json.load(f)['state_dict']


def test_inverse_maps_the_shipped_model_onto_the_table():
    native = to_reference(build().state_dict())
    assert {k: list(v.shape) for k, v in native.items()} == reference_layout()


def test_reference_shaped_checkpoint_converts_strictly(tmp_path, capsys):
    torch.manual_seed(1)
    state = {k: torch.randn(s) if s else torch.tensor(5) for k, s in reference_layout().items()}
    src, dst = tmp_path / 'economicgrasp_epoch10.tar', tmp_path / 'mmgrasp.pth'
    # what the reference train.py saves (here from a DataParallel wrapper: 'module.' keys)
    torch.save({'epoch': 10, 'optimizer_state_dict': {},
                'model_state_dict': {f'module.{k}': v for k, v in state.items()}}, src)
    assert converter.main(['economicgrasp', str(src), str(dst), '--config', MODEL_CONFIG]) == 0
    assert 'wrote 260 tensors' in capsys.readouterr().out
    model = build()
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    assert torch.load(dst, weights_only=True)['meta']['epoch'] == 10
    loaded = model.state_dict()
    assert torch.equal(loaded['grasp_head.outputs.score.weight'],
                       state['grasp_head.conv_score.weight'])
    assert torch.equal(loaded['crop.attention.out.bias'],
                       state['cy_group.local_interaction_module.msa.linears.3.bias'])
    assert torch.equal(loaded['backbone.head.bias'], state['backbone.final.bias'][0])
    assert sorted(float(v.double().sum()) for v in loaded.values()) == pytest.approx(
        sorted(float(v.double().sum()) for v in state.values()), rel=1e-6, abs=1e-3)


def test_round_trip_predictions_equal_native():
    native = small_model(0)
    reference = to_reference(native.state_dict())
    converted = small_model(1)
    target = {k: v.shape for k, v in converted.state_dict().items()}
    converted.load_state_dict(converter.convert_state_dict('economicgrasp', reference, target),
                              strict=True)
    gen = torch.Generator().manual_seed(0)
    points = (torch.rand(1, 400, 3, generator=gen) * torch.tensor([0.2, 0.2, 0.08])
              + torch.tensor([-0.1, -0.1, 0.4]))
    with torch.no_grad():
        ours = converted.predict({'points': points}, None)[0].pred_grasps
        expected = native.predict({'points': points}, None)[0].pred_grasps
    assert torch.equal(ours, expected)


def test_wrong_checkpoints_are_refused_naming_the_key():
    target = {k: v.shape for k, v in build().state_dict().items()}
    state = {k: torch.zeros(s) for k, s in reference_layout().items()}
    state['grasp_head.conv_angle.weight'] = torch.zeros(12, 64, 1)  # 12 angle classes, not 13
    with pytest.raises(converter.ConversionError, match=r'grasp_head\.conv_angle\.weight '
                                                        r'\(12, 64, 1\)'):
        converter.convert_state_dict('economicgrasp', state, target)
    state = {k: torch.zeros(s) for k, s in reference_layout().items()}
    del state['cy_group.mlps2.layer1.bn.bn.running_var']
    with pytest.raises(converter.ConversionError, match=r'crop\.mlp2\.4\.running_var'):
        converter.convert_state_dict('economicgrasp', state, target)
    gsnet = json.load(open(TABLE.replace('economicgrasp', 'gsnet')))['state_dict']
    with pytest.raises(converter.ConversionError, match='unknown keys'):
        converter.convert_state_dict('economicgrasp',
                                     {k: torch.zeros(s) for k, s in gsnet.items()}, target)
