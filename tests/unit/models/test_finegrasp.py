"""FineGrasp's network against the reference (HorizonRobotics/RoboOrchardLab @241bbc6,
``robo_orchard_lab/models/finegrasp/``): the head parameter for parameter against names and
shapes written here from ``finegrasp.py`` and ``head/head.py``; the multi-scale crop against
four separately run EconomicGrasp groups; the fusion against ``torch.nn.TransformerEncoder``
and the reference's softmax weighting; the decoding against a numpy port of ``pred_decode``;
the xyz + normal input features; finite losses on degenerate batches."""
import dataclasses
import json
import math
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.models.heads.economic_heads import InteractiveCylinderCrop
from mmgrasp.models.heads.finegrasp_heads import GroupTransformerFusion, MultiScaleInteractiveCrop
from mmgrasp.geometry.grasp_frames import approach_to_matrix, generate_grasp_views
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.apis import register_all_modules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'finegrasp.json')
register_all_modules(False)
SMALL = dict(num_seeds=64, backbone=dict(channels=(8,) * 8, stem_channels=8, out_channels=32),
             crop=dict(channels=(16, 16), channels2=(16, 16), fusion_heads=4,
                       fusion_feedforward=32),
             head=dict(embed_channels=8), test_cfg=dict(collision_thresh=0.0))


def shipped_model(**overrides):
    cfg = Config.fromfile(os.path.join(REPO, 'configs', '_base_', 'models', 'finegrasp.py'))
    cfg.merge_from_dict(dict(model=overrides))
    return build_in_scope(MODELS, cfg.model)


def reference_head_table(seed_dim=512, num_view=300, num_angle=12, num_depth=4, groups=4):
    """{name: shape} of every non-backbone tensor of the reference FineGrasp, in registration
    order, written from finegrasp.py / head.py (Conv1d (out, in, 1), SharedMLP's Conv2d
    (out, in, 1, 1) without bias + BatchNorm2d as ``layer{i}.conv`` / ``layer{i}.bn.bn``,
    MultiHeadAttn's four Linear as ``msa.linears.{i}``, nn.TransformerEncoderLayer's names)."""
    t = {'graspable.conv_graspable.weight': [3, seed_dim, 1],
         'graspable.conv_graspable.bias': [3],
         'view.conv1.weight': [seed_dim, seed_dim, 1], 'view.conv1.bias': [seed_dim],
         'view.conv2.weight': [num_view, seed_dim, 1], 'view.conv2.bias': [num_view]}

    def shared_mlp(prefix, widths):
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            t[f'{prefix}.layer{i}.conv.weight'] = [b, a, 1, 1]
            for k in ('weight', 'bias', 'running_mean', 'running_var'):
                t[f'{prefix}.layer{i}.bn.bn.{k}'] = [b]
            t[f'{prefix}.layer{i}.bn.bn.num_batches_tracked'] = []

    def attention(prefix, dim):
        for i in range(4):
            t[f'{prefix}.msa.linears.{i}.weight'] = [dim, dim]
            t[f'{prefix}.msa.linears.{i}.bias'] = [dim]
        t[f'{prefix}.norm1.weight'] = [dim]
        t[f'{prefix}.norm1.bias'] = [dim]

    for g in range(groups):
        shared_mlp(f'cy_groups.{g}.mlps', [3 + seed_dim, 256, 256])
        attention(f'cy_groups.{g}.local_interaction_module', 259)
        shared_mlp(f'cy_groups.{g}.mlps2', [259, 256, 256])
    for layer in range(2):
        p = f'fuse_multi_scale.transformer.layers.{layer}'
        t.update({f'{p}.self_attn.in_proj_weight': [768, 256],
                  f'{p}.self_attn.in_proj_bias': [768],
                  f'{p}.self_attn.out_proj.weight': [256, 256],
                  f'{p}.self_attn.out_proj.bias': [256],
                  f'{p}.linear1.weight': [1024, 256], f'{p}.linear1.bias': [1024],
                  f'{p}.linear2.weight': [256, 1024], f'{p}.linear2.bias': [256],
                  f'{p}.norm1.weight': [256], f'{p}.norm1.bias': [256],
                  f'{p}.norm2.weight': [256], f'{p}.norm2.bias': [256]})
    t['fuse_multi_scale.attn.weight'] = [1, 256]
    t['fuse_multi_scale.attn.bias'] = [1]
    for kind in ('angle', 'depth', 'width', 'score'):
        t[f'grasp_head.conv_{kind}_feature.weight'] = [64, 256, 1]
        t[f'grasp_head.conv_{kind}_feature.bias'] = [64]
    attention('grasp_head.global_interaction_module', 64)
    outs = dict(angle=num_angle + 1, depth=num_depth + 1, width=1, score=6)
    for kind, n in outs.items():
        t[f'grasp_head.conv_{kind}.weight'] = [n, 64, 1]
        t[f'grasp_head.conv_{kind}.bias'] = [n]
    return t


def reference_name(key: str) -> str:
    """mmgrasp key -> the reference's (this test's own rules, not the converter's)."""
    module, tail = key.rsplit('.', 1)
    parts = module.split('.')
    if module == 'graspable_head.conv':
        return f'graspable.conv_graspable.{tail}'
    if parts[0] == 'approach_head':
        return f'view.{parts[1]}.{tail}'
    if parts[:2] == ['crop', 'groups']:
        group = f'cy_groups.{parts[2]}'
        if parts[3] in ('mlp', 'mlp2'):
            index = int(parts[4])
            layer = f'layer{index // 3}.' + ('conv' if index % 3 == 0 else 'bn.bn')
            return f'{group}.{"mlps" if parts[3] == "mlp" else "mlps2"}.{layer}.{tail}'
        inner = {'query': 'msa.linears.0', 'key': 'msa.linears.1', 'value': 'msa.linears.2',
                 'out': 'msa.linears.3', 'norm': 'norm1'}[parts[4]]
        return f'{group}.local_interaction_module.{inner}.{tail}'
    if parts[:2] == ['crop', 'fusion']:
        rest = '.'.join(parts[2:])
        return (f'fuse_multi_scale.transformer.{rest}.{tail}' if parts[2] == 'layers'
                else f'fuse_multi_scale.{rest}.{tail}')
    if parts[:2] == ['grasp_head', 'attention']:
        inner = {'query': 'msa.linears.0', 'key': 'msa.linears.1', 'value': 'msa.linears.2',
                 'out': 'msa.linears.3', 'norm': 'norm1'}[parts[2]]
        return f'grasp_head.global_interaction_module.{inner}.{tail}'
    if parts[:2] == ['grasp_head', 'embeddings']:
        return f'grasp_head.conv_{parts[2]}_feature.{tail}'
    if parts[:2] == ['grasp_head', 'outputs']:
        return f'grasp_head.conv_{parts[2]}.{tail}'
    raise AssertionError(f'no reference name for {key}')


def test_head_parameters_equal_the_reference():
    """Every non-backbone tensor maps to exactly one reference tensor of the same shape
    (4 486 625 parameters in the head); the head entries of the JSON listed from the
    instantiated reference model are this table too, and the whole model has its 388 tensors
    and 19 145 441 parameters."""
    state = shipped_model().state_dict()
    ours = {reference_name(k): list(v.shape) for k, v in state.items()
            if not k.startswith('backbone.')}
    table = reference_head_table()
    assert len(ours) == len([k for k in state if not k.startswith('backbone.')])  # 1:1
    assert ours == table
    assert sum(math.prod(s) for k, s in table.items()
               if not k.endswith(('running_mean', 'running_var', 'num_batches_tracked'))) \
        == 4486625
    reference = json.load(open(TABLE))  # the whole instantiated reference model
    whole = reference['state_dict']
    assert {k: v for k, v in whole.items() if not k.startswith('backbone.')} == table
    assert len(state) == len(whole) == reference['tensors'] == 388
    assert sum(v.numel() for k, v in state.items() if not k.endswith(
        ('running_mean', 'running_var', 'num_batches_tracked'))) == reference['parameters'] \
        == 19145441


def test_head_options_size_the_reference_table():
    """The table's arithmetic follows the options: 6 angles / 3 depths / 60 views."""
    model = shipped_model(num_angles=6, num_depths=3, num_views=60,
                          backbone=dict(out_channels=512))
    ours = {reference_name(k): list(v.shape) for k, v in model.state_dict().items()
            if not k.startswith('backbone.')}
    assert ours == reference_head_table(num_view=60, num_angle=6, num_depth=3)


def _cloud(batch=2, num=3000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, num, 3, generator=gen) * torch.tensor([0.3, 0.3, 0.1])
            + torch.tensor([-0.15, -0.15, 0.4]))


def _normals(points, seed=1):
    gen = torch.Generator().manual_seed(seed)
    n = torch.randn(points.shape, generator=gen)
    return n / n.norm(dim=-1, keepdim=True)


def test_forward_has_the_reference_shapes_and_is_finite():
    torch.manual_seed(0)
    model = shipped_model(backbone=dict(channels=(16, 16, 32, 32, 32, 32, 16, 16),
                                        stem_channels=16)).eval()
    points = _cloud()
    inputs = {'points': points, 'normals': _normals(points)}
    with torch.no_grad():
        out = model._seed_stage(inputs)
        views, residual = model.approach_head(out['seed_features'])
        rot = model.approach_head.view_rotations(views.argmax(-1))
        crops = model.crop(out['seeds'], out['seed_features'] + residual, rot, None)
        pred = model._grasp_stage(out, rot, out['seed_features'] + residual, None)
    assert out['seeds'].shape == (2, 1024, 3) and out['seed_features'].shape == (2, 512, 1024)
    assert views.shape == (2, 1024, 300) and crops.shape == (2, 256, 1024)
    assert {k: tuple(v.shape) for k, v in pred.items()} == dict(
        angle=(2, 13, 1024), depth=(2, 5, 1024), width=(2, 1024), score=(2, 6, 1024))
    assert all(torch.isfinite(v).all() for v in [views, crops, *pred.values()])
    assert [round(r, 6) for r in model.crop.groups.radii] == [0.0175, 0.035, 0.0525, 0.07]


def _seed_rotations(n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    views = generate_grasp_views(300)[torch.randint(0, 300, (n,), generator=gen)]
    return approach_to_matrix(-views, torch.zeros(n))[None]


@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_stacked_groups_equal_four_separate_groups(mode):
    """The four groups run stacked (one query call, one gather, batched matmuls / batch
    norms / attention) give what four InteractiveCylinderCrop modules loaded with the
    per-group state dict compute one by one (the reference's four CylinderGroup calls, each
    with its own cylinder query): outputs, and in training the batch-norm running statistics
    and counters; the state dict round-trips, and its initial values are those of four
    modules built in turn."""
    torch.manual_seed(5)
    crop = shipped_model(**SMALL).crop
    state = {k: v.clone() for k, v in crop.state_dict().items()}
    seeds, feats = _cloud(1, 200), torch.randn(1, 32, 200)
    rot = _seed_rotations(200)
    separate = []
    for g, scale in enumerate((0.25, 0.5, 0.75, 1.0)):
        module = InteractiveCylinderCrop(32, (16, 16), (16, 16), 0.05, 0.07 * scale)
        module.load_state_dict({k[len(f'groups.{g}.'):]: v for k, v in state.items()
                                if k.startswith(f'groups.{g}.')})
        separate.append(getattr(module, mode)())
    crop = getattr(crop, mode)()
    ours = crop.groups(crop.group(seeds, feats, rot), seeds, None)  # (G, C, B, Ns)
    theirs = torch.stack([m(seeds, feats, rot, None) for m in separate]).permute(0, 2, 1, 3)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=2e-5)
    assert not torch.allclose(theirs[0], theirs[3], atol=1e-3)  # the radii differ
    after = crop.state_dict()
    for g, module in enumerate(separate):
        for k, v in module.state_dict().items():
            torch.testing.assert_close(after[f'groups.{g}.{k}'], v, rtol=1e-5, atol=1e-6)
    if mode == 'train':
        assert int(after['groups.0.mlp.1.num_batches_tracked']) == 1
        assert not torch.equal(after['groups.2.mlp2.1.running_mean'],
                               state['groups.2.mlp2.1.running_mean'])
    fresh = MultiScaleInteractiveCrop(32, channels=(16, 16), channels2=(16, 16),
                                      fusion_heads=4, fusion_feedforward=32)
    fresh.load_state_dict(after)
    assert all(torch.equal(v, after[k]) for k, v in fresh.state_dict().items())
    with pytest.raises(RuntimeError, match='groups.qkv_weight'):
        fresh.load_state_dict({k: v for k, v in after.items()
                               if k != 'groups.1.attention.key.weight'})


def test_crop_regathers_the_grouped_points_with_the_same_values_and_less_memory():
    """In training the grouped crops (the first conv's input) are gathered again in the
    backward pass instead of kept: the output, every gradient (the features' too) and the
    batch-norm statistics equal the formulation that keeps them (group, then the stacked
    groups on the 5-D crops) bit for bit, with the same dropout draws, and the counted peak of
    live bytes is lower by most of the crops' size."""
    import copy

    from mmgrasp.models.utils.live_bytes import LiveBytes
    torch.manual_seed(5)
    crop = MultiScaleInteractiveCrop(96, channels=(16, 16), channels2=(16, 16),
                                     fusion_heads=4, fusion_feedforward=32)
    kept = copy.deepcopy(crop)
    seeds, feats, rot = _cloud(1, 100), torch.randn(1, 96, 100), _seed_rotations(100)

    def step(module, forward):
        features = feats.clone().requires_grad_()
        generator = torch.Generator().manual_seed(3)
        with LiveBytes() as counter:
            start = counter.live
            out = forward(module, features, generator)
            out.square().sum().backward()
        return out, features.grad, counter.peak - start

    def old(m, features, generator):
        out = m.groups(m.group(seeds, features, rot), seeds, generator)
        return m.fusion(out.permute(2, 0, 1, 3), generator)

    out, grad, peak = step(crop, lambda m, f, g: m(seeds, f, rot, g))
    out_kept, grad_kept, peak_kept = step(kept, old)
    assert torch.equal(out, out_kept) and torch.equal(grad, grad_kept)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(crop.parameters(), kept.parameters()))
    state, state_kept = crop.state_dict(), kept.state_dict()
    assert all(torch.equal(v, state_kept[k]) for k, v in state.items())
    crops_bytes = 4 * (3 + 96) * 100 * 16 * 4  # (G, 3 + C, B·Ns·k) float32
    assert peak_kept - peak > 0.5 * crops_bytes


def test_initial_group_weights_are_those_of_four_crops_built_in_turn():
    torch.manual_seed(11)
    crop = MultiScaleInteractiveCrop(32, channels=(16, 16), channels2=(16, 16),
                                     fusion_heads=4, fusion_feedforward=32)
    torch.manual_seed(11)
    built = [InteractiveCylinderCrop(32, (16, 16), (16, 16), 0.05, 0.07 * s)
             for s in (0.25, 0.5, 0.75, 1.0)]
    state = crop.state_dict()
    for g, module in enumerate(built):
        for k, v in module.state_dict().items():
            assert torch.equal(state[f'groups.{g}.{k}'], v), (g, k)


def _reference_fusion(fusion: GroupTransformerFusion, groups: torch.Tensor,
                      weighting: str = 'softmax') -> torch.Tensor:
    """GroupTransformerFusion.forward of finegrasp.py on torch's own encoder (eval): x
    (B, G, D, N) -> (G, N·B, D), encoder, softmax over G of attn(out), weighted sum.
    ``weighting='mean'`` is a mutant (plain mean of the groups)."""
    B, G, D, N = groups.shape
    layer = torch.nn.TransformerEncoderLayer(d_model=D, nhead=fusion.layers[0].self_attn.num_heads,
                                             dim_feedforward=fusion.layers[0].linear1.out_features)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=len(fusion.layers),
                                          enable_nested_tensor=False)
    state = {f'layers.{k}': v for k, v in fusion.layers.state_dict().items()}
    encoder.load_state_dict(state)
    encoder.eval()
    x = groups.permute(1, 3, 0, 2).reshape(G, N * B, D)
    out = encoder(x)
    if weighting == 'softmax':
        weights = torch.softmax(fusion.attn(out), dim=0)
    else:
        weights = torch.full_like(out[..., :1], 1 / G)
    return (out * weights).sum(0).reshape(N, B, D).permute(1, 2, 0)


def test_fusion_equals_torch_transformer_and_the_reference_weighting():
    torch.manual_seed(6)
    fusion = GroupTransformerFusion(32, 2, 8, 64, 0.1).eval()
    groups = torch.randn(2, 4, 32, 7)
    with torch.no_grad():
        ours = fusion(groups, None)
        torch.testing.assert_close(ours, _reference_fusion(fusion, groups), rtol=1e-4,
                                   atol=1e-5)
        assert not torch.allclose(ours, _reference_fusion(fusion, groups, 'mean'), atol=1e-3)


def test_fusion_dropout_draws_from_the_generator():
    """Training dropout (p 0.1 at the encoder's four places) comes from the batch generator:
    same generator, same output; another seed, another; None = no dropout = p 0."""
    torch.manual_seed(7)
    fusion = GroupTransformerFusion(16, 2, 4, 32, 0.1)
    groups = torch.randn(1, 4, 16, 9)
    g = lambda s: torch.Generator().manual_seed(s)  # noqa: E731
    assert torch.equal(fusion(groups, g(0)), fusion(groups, g(0)))
    assert not torch.equal(fusion(groups, g(0)), fusion(groups, g(1)))
    plain = fusion(groups, None)
    fusion.dropout_p = 0.0
    assert torch.equal(plain, fusion(groups, g(0)))


def test_input_features_are_xyz_and_normals():
    """use_normals feeds cat(points, normals) (6 channels): the normals change the seeds'
    features; without use_normals (3 channels of ones) they are ignored; a missing key, a
    wrong shape and a backbone of the wrong width are refused, naming what to fix."""
    torch.manual_seed(8)
    points = _cloud(1, 600)
    model = shipped_model(**SMALL).eval()
    seen = []
    model.backbone.register_forward_hook(lambda m, args, out: seen.append(args))
    with torch.no_grad():
        a = model._seed_stage({'points': points, 'normals': _normals(points, 1)})
        b = model._seed_stage({'points': points, 'normals': _normals(points, 2)})
    assert torch.equal(seen[0][1], torch.cat([points, _normals(points, 1)], -1))
    assert not torch.equal(a['objectness'], b['objectness'])
    with pytest.raises(KeyError, match="inputs\\['normals'\\]"):
        model._seed_stage({'points': points})
    with pytest.raises(ValueError, match='does not match'):
        model._seed_stage({'points': points, 'normals': _normals(points)[:, :10]})
    with pytest.raises(ValueError, match='in_channels=6'):
        shipped_model(**SMALL, use_normals=False)
    ones = shipped_model(**{**SMALL, 'backbone': dict(SMALL['backbone'], in_channels=3)},
                         use_normals=False).eval()
    with torch.no_grad():
        c = ones._seed_stage({'points': points, 'normals': _normals(points, 1)})
        d = ones._seed_stage({'points': points})
    assert torch.equal(c['objectness'], d['objectness'])


def test_predict_decodes_as_the_reference():
    """pred_decode of finegrasp/utils.py in numpy: score Σ (0, .2, .4, .6, .8, 1) · raw logits,
    width clamp(1.2 w / 10, 0, 0.1), height 0.02, depth (argmax + 1) · 0.01, rotation
    batch_viewpoint_params_to_matrix(−view, argmax · π/12), the seed, object id −1."""
    torch.manual_seed(4)
    model = shipped_model(**SMALL).eval()
    points = _cloud(1, 800)
    inputs = {'points': points, 'normals': _normals(points)}
    with torch.no_grad():
        rows = model.predict(inputs, [GraspDataSample()])[0].pred_grasps.numpy()
        out = model._seed_stage(inputs)
        views, residual = model.approach_head(out['seed_features'])
        top = views.argmax(-1)
        pred = model._grasp_stage(out, model.approach_head.view_rotations(top),
                                  out['seed_features'] + residual, None)
    p = {k: v[0].numpy().astype(np.float64) for k, v in pred.items()}
    score = (np.array([0, 0.2, 0.4, 0.6, 0.8, 1])[:, None] * p['score']).sum(0)
    angle = p['angle'].argmax(0) * np.pi / 12
    depth = (p['depth'].argmax(0) + 1) * 0.01
    width = np.clip(1.2 * p['width'] / 10.0, 0.0, 0.1)
    # generate_grasp_views and batch_viewpoint_params_to_matrix, written from utils.py
    phi = (np.sqrt(5) - 1) / 2
    i = np.arange(300)
    z = (2 * i + 1) / 300 - 1
    views_np = np.stack([np.sqrt(1 - z ** 2) * np.cos(2 * i * np.pi * phi),
                         np.sqrt(1 - z ** 2) * np.sin(2 * i * np.pi * phi), z], 1)
    ax = -views_np[top[0].numpy()]
    ay = np.stack([-ax[:, 1], ax[:, 0], np.zeros(len(ax))], -1)
    ax = ax / np.linalg.norm(ax, axis=-1, keepdims=True)
    ay = ay / np.linalg.norm(ay, axis=-1, keepdims=True)
    az = np.cross(ax, ay)
    c, s = np.cos(angle), np.sin(angle)
    r1 = np.zeros((len(angle), 3, 3))
    r1[:, 0, 0] = 1
    r1[:, 1, 1], r1[:, 1, 2], r1[:, 2, 1], r1[:, 2, 2] = c, -s, s, c
    rot = np.stack([ax, ay, az], -1) @ r1
    n = len(score)
    expected = np.concatenate([score[:, None], width[:, None], np.full((n, 1), 0.02),
                               depth[:, None], rot.reshape(n, 9), out['seeds'][0].numpy(),
                               -np.ones((n, 1))], 1)
    assert rows.shape == (64, 17)
    np.testing.assert_allclose(rows, expected, rtol=1e-5, atol=1e-5)
    # mutants: a softmaxed score, depth without the + 1
    soft = np.exp(p['score']) / np.exp(p['score']).sum(0)
    assert not np.allclose(rows[:, 0], (np.array([0, .2, .4, .6, .8, 1])[:, None] * soft).sum(0),
                           atol=1e-3)
    assert not np.allclose(rows[:, 3], p['depth'].argmax(0) * 0.01)


V = 5  # tests/conftest.py SMALL_GRID (5, 3, 3); the heads keep 12 angles / 4 depths, as the
# assigner's unmatched defaults (angle 12, depth 4) are classes of those heads


@pytest.fixture(scope='module')
def labelled_batch(synthetic_root):
    pipeline = [dict(type='LoadGraspScene', num_points=1500, with_graspness=True),
                dict(type='LoadEconomicLabels', grids='dense', top_k=V),
                dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]
    ds = GraspNetDataset(synthetic_root, pipeline=pipeline, seed=0)
    return [ds[0], ds[3]]


def _loss(model, samples):
    data = model.data_preprocessor(pseudo_collate(samples), training=True)
    data['inputs']['normals'] = _normals(data['inputs']['points'])
    return model.loss(data['inputs'], data['data_samples'])


@pytest.mark.parametrize('case', ['normal', 'no_objects', 'no_positives', 'no_label_points'])
def test_degenerate_batches_give_finite_losses_and_gradients(labelled_batch, case):
    """No point on an object (objectness labels 0), no valid seed (every label point 1 m
    away), no label point at all: every term and every gradient stays finite; the masked
    terms are 0 where their mask is empty."""
    torch.manual_seed(9)
    model = shipped_model(**{**SMALL, 'num_views': V}, assigner=dict(num_views=V)).train()
    samples = []
    for s in labelled_batch:
        s = dict(inputs=dict(s['inputs']), data_samples=s['data_samples'].clone())
        labels = s['data_samples'].economic_labels
        if case == 'no_objects':
            s['inputs']['objectness'] = torch.zeros_like(s['inputs']['objectness'])
        if case == 'no_positives':
            labels = dataclasses.replace(labels, points=labels.points + 1.0)
        if case == 'no_label_points':
            labels = dataclasses.replace(labels, points=labels.points[:0],
                                         point_instance=labels.point_instance[:0],
                                         scene_row=labels.scene_row[:0])
        s['data_samples'].economic_labels = labels
        samples.append(s)
    losses = _loss(model, samples)
    total = sum(losses.values())
    total.backward()
    assert torch.isfinite(total)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    if case == 'normal':
        assert all(float(v.detach()) > 0 for v in losses.values())
    if case == 'no_objects':
        assert float(losses['loss_graspness'].detach()) == 0
    if case in ('no_positives', 'no_label_points'):
        for k in ('angle', 'depth', 'score', 'width'):
            assert float(losses[f'loss_{k}'].detach()) == 0
