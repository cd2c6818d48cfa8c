"""EconomicGrasp's network against the reference (iSEE-Laboratory/EconomicGrasp @7361bb6):
parameter for parameter against the key table derived from the reference code
(tests/data/reference_state_dicts/economicgrasp.json), the reference's output shapes on a
synthetic cloud, its attention and decoding against numpy ports, and the options' effects."""
import json
import math
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config

from mmgrasp.models.heads.economic_heads import (AttentionBlock, InteractiveCylinderCrop,
                                                 InteractiveGraspHead)
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.apis import register_all_modules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'economicgrasp.json')
register_all_modules(False)


def shipped_model(**overrides):
    cfg = Config.fromfile(os.path.join(REPO, 'configs', '_base_', 'models', 'economicgrasp.py'))
    cfg.merge_from_dict(dict(model=overrides))
    return build_in_scope(MODELS, cfg.model)


def _reference_name(key: str) -> str:
    """mmgrasp key -> the reference's, written here from modules_economicgrasp.py (independent
    of the converter's rules)."""
    module, tail = key.rsplit('.', 1)
    parts = module.split('.')
    if module == 'graspable_head.conv':
        return f'graspable.conv_graspable.{tail}'
    if parts[0] == 'approach_head':
        return f'view.{parts[1]}.{tail}'
    if parts[0] == 'crop' and parts[1] in ('mlp', 'mlp2'):
        index = int(parts[2])
        layer = f'layer{index // 3}.' + ('conv' if index % 3 == 0 else 'bn.bn')
        return f'cy_group.{"mlps" if parts[1] == "mlp" else "mlps2"}.{layer}.{tail}'
    if parts[1] == 'attention':
        owner = ('cy_group.local_interaction_module' if parts[0] == 'crop'
                 else 'grasp_head.global_interaction_module')
        inner = {'query': 'msa.linears.0', 'key': 'msa.linears.1', 'value': 'msa.linears.2',
                 'out': 'msa.linears.3', 'norm': 'norm1'}[parts[2]]
        return f'{owner}.{inner}.{tail}'
    if parts[0] == 'grasp_head' and parts[1] == 'embeddings':
        return f'grasp_head.conv_{parts[2]}_feature.{tail}'
    if parts[0] == 'grasp_head' and parts[1] == 'outputs':
        return f'grasp_head.conv_{parts[2]}.{tail}'
    raise AssertionError(f'no reference name for {key}')


def test_parameters_equal_the_reference_table():
    """Every head tensor under the reference's name with its shape (PyTorch layers: the same
    layout), the backbone as GSNet's (its MinkUNet14D is EconomicGrasp's TDUnet, layer for
    layer; the kernel layout conversion is tested in test_model_converters.py), and the same
    counts: 15 750 238 parameters in 260 tensors."""
    table = json.load(open(TABLE))
    shapes = table['state_dict']
    params = sum(math.prod(s) for k, s in shapes.items()
                 if not k.endswith(('running_mean', 'running_var', 'num_batches_tracked')))
    assert (params, len(shapes)) == (table['parameters'], table['tensors']) == (15750238, 260)
    model = shipped_model()
    state = model.state_dict()
    assert len(state) == len(shapes)
    assert sum(p.numel() for p in model.parameters()) == params
    heads = {_reference_name(k): list(v.shape) for k, v in state.items()
             if not k.startswith('backbone.')}
    assert heads == {k: v for k, v in shapes.items() if not k.startswith('backbone.')}
    gsnet = json.load(open(TABLE.replace('economicgrasp', 'gsnet')))['state_dict']
    assert {k: v for k, v in shapes.items() if k.startswith('backbone.')} == \
        {k: v for k, v in gsnet.items() if k.startswith('backbone.')}
    backbone = [v.numel() for k, v in state.items() if k.startswith('backbone.')]
    assert sorted(backbone) == sorted(math.prod(v) for k, v in gsnet.items()
                                      if k.startswith('backbone.'))


def _cloud(batch: int = 2, num: int = 3000, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, num, 3, generator=gen) * torch.tensor([0.3, 0.3, 0.1])
            + torch.tensor([-0.15, -0.15, 0.4]))


def test_forward_has_the_reference_shapes_and_is_finite():
    """Paper-size heads (512 channels, 1024 seeds, 300 views) on a synthetic cloud; the backbone
    narrower inside (its width does not change the output shapes)."""
    torch.manual_seed(0)
    model = shipped_model(backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16))).eval()
    points = _cloud()
    with torch.no_grad():
        out = model._seed_stage({'points': points})
        view_scores, residual = model.approach_head(out['seed_features'])
        rotations = model.approach_head.view_rotations(view_scores.argmax(-1))
        pred = model._grasp_stage(out, rotations, out['seed_features'] + residual, None)
    expected = dict(objectness=(2, 2, 3000), graspness=(2, 3000), seeds=(2, 1024, 3),
                    seed_features=(2, 512, 1024))
    assert {k: tuple(out[k].shape) for k in expected} == expected
    assert view_scores.shape == (2, 1024, 300)
    assert {k: tuple(v.shape) for k, v in pred.items()} == dict(
        angle=(2, 13, 1024), depth=(2, 5, 1024), width=(2, 1024), score=(2, 6, 1024))
    for tensor in [view_scores, *pred.values()]:
        assert torch.isfinite(tensor).all()


def _numpy_attention(block: AttentionBlock, tokens: np.ndarray, residual: str = 'input'
                     ) -> np.ndarray:
    """The reference's AttentionModule (one head, no dropout), in float64; ``residual='value'``
    is a mutant that adds the projected value instead of the input."""
    w = {k: v.detach().double().numpy() for k, v in block.state_dict().items()}

    def linear(name, x):
        return x @ w[f'{name}.weight'].T + w[f'{name}.bias']

    x = tokens.astype(np.float64)
    q, k, v = linear('query', x), linear('key', x), linear('value', x)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    attended = linear('out', (scores / scores.sum(-1, keepdims=True)) @ v)
    y = (x if residual == 'input' else v) + attended
    mean, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
    return (y - mean) / np.sqrt(var + 1e-5) * w['norm.weight'] + w['norm.bias']


def test_attention_equals_reference_port():
    torch.manual_seed(1)
    block = AttentionBlock(24).eval()
    tokens = torch.randn(7, 5, 24)
    np.testing.assert_allclose(block(tokens).detach().numpy(),
                               _numpy_attention(block, tokens.numpy()), rtol=1e-4, atol=1e-5)
    # the residual is the unprojected input: the mutant adding the projected value differs
    mutant = _numpy_attention(block, tokens.numpy(), residual='value')
    assert not np.allclose(block(tokens).detach().numpy(), mutant, atol=1e-3)


def test_grasp_head_tokens_attend_per_seed():
    """The four tokens of one seed attend to each other, never to another seed's: changing one
    seed's feature changes only that seed's outputs."""
    torch.manual_seed(2)
    head = InteractiveGraspHead(32, 12, 4, embed_channels=16).eval()
    features = torch.randn(2, 32, 9)
    before = head(features)
    features[1, :, 4] += 1
    after = head(features)
    for name, value in after.items():
        changed = (value != before[name]).reshape(2, -1, 9).any(dim=1)
        assert changed[1, 4] and changed.sum() == 1, name


def test_attention_dropout_draws_from_the_generator():
    """In training the dropout masks come from the batch generator: the same generator gives
    the same output, another seed another; at inference (None) nothing is dropped; p = 0 is
    the identity (the option has its effect)."""
    torch.manual_seed(3)
    crop = InteractiveCylinderCrop(16, (16, 16), (16, 16), attention_dropout=0.3)
    seeds = _cloud(1, 64)
    feats = torch.randn(1, 16, 64)
    rot = approach_to_matrix(-generate_grasp_views(300)[torch.arange(64)][None],
                             torch.zeros(1, 64))

    def run(generator, p=0.3):
        crop.attention.attention_dropout = p
        return crop(seeds, feats, rot, generator)

    g = lambda s: torch.Generator().manual_seed(s)  # noqa: E731
    assert torch.equal(run(g(0)), run(g(0)))
    assert not torch.equal(run(g(0)), run(g(1)))
    assert torch.equal(run(None), run(g(0), p=0.0))
    assert not torch.equal(run(None), run(g(0)))


def test_predict_decodes_as_the_reference():
    """pred_decode: score = Σ (0, .2, .4, .6, .8, 1) · raw score logits (no softmax), angle
    argmax · π/12 (13 classes), depth (argmax + 1) · 0.01, width clamp(1.2 w / 10, 0, 0.1),
    rotation of the argmax view, height 0.02, the seed as translation, object id −1."""
    torch.manual_seed(4)
    model = shipped_model(num_seeds=64, backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8),
                                                      out_channels=32),
                          crop=dict(channels=(16, 16), channels2=(16, 16)),
                          test_cfg=dict(collision_thresh=0.0)).eval()
    points = _cloud(1, 800)
    with torch.no_grad():
        rows = model.predict({'points': points}, [GraspDataSample()])[0].pred_grasps.numpy()
        out = model._seed_stage({'points': points})
        views, residual = model.approach_head(out['seed_features'])
        top = views.argmax(-1)
        pred = model._grasp_stage(out, model.approach_head.view_rotations(top),
                                  out['seed_features'] + residual, None)
    p = {k: v[0].numpy().astype(np.float64) for k, v in pred.items()}
    score = (np.array([0, .2, .4, .6, .8, 1])[:, None] * p['score']).sum(0)
    angle = p['angle'].argmax(0) * np.pi / 12
    depth = (p['depth'].argmax(0) + 1) * 0.01
    width = np.clip(1.2 * p['width'] / 10, 0, 0.1)
    approach = -generate_grasp_views(300)[top[0]].double().numpy()
    x = approach / np.linalg.norm(approach, axis=1, keepdims=True)
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(len(x))], 1)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    z = np.cross(x, y)
    c, s = np.cos(angle), np.sin(angle)
    rotation = np.stack([x, y * c[:, None] + z * s[:, None], -y * s[:, None] + z * c[:, None]],
                        axis=-1)
    expected = np.concatenate([score[:, None], width[:, None], np.full((64, 1), 0.02),
                               depth[:, None], rotation.reshape(64, 9),
                               out['seeds'][0].numpy(), -np.ones((64, 1))], axis=1)
    assert rows.shape == (64, 17)
    np.testing.assert_allclose(rows, expected, rtol=1e-5, atol=1e-5)
    softmaxed = (np.array([0, .2, .4, .6, .8, 1])[:, None] *
                 np.exp(p['score']) / np.exp(p['score']).sum(0)).sum(0)
    assert not np.allclose(rows[:, 0], softmaxed, atol=1e-3)  # no softmax


@pytest.mark.parametrize('option,value', [('num_angles', 6), ('num_depths', 3),
                                          ('num_views', 60)])
def test_grid_options_size_the_heads(option, value):
    model = shipped_model(**{option: value}, backbone=dict(out_channels=32))
    sizes = dict(num_angles=model.grasp_head.outputs['angle'].out_channels - 1,
                 num_depths=model.grasp_head.outputs['depth'].out_channels - 1,
                 num_views=model.approach_head.num_views)
    assert sizes[option] == value
