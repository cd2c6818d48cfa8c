"""GraspNet-baseline and Scale-Balanced-Grasp: one training step is bit-identical between dense
and deferred label storages (every loss, every parameter's gradient); predict writes
well-formed grasps; the losses equal a literal port of the reference formulas; the
ScaleStatisticHook computes the statistic once and then reads its cache."""
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.model import MMDistributedDataParallel
from mmengine.registry import init_default_scope
from torch import nn

import mmgrasp.models.assigners.scale_statistic as scale_statistic_module
from mmgrasp.engine.hooks.scale_statistic_hook import (ScaleStatisticError, ScaleStatisticHook,
                                                      scale_statistic_recipe)
from mmgrasp.models.assigners import ScaleBalancedAssigner, compute_scale_statistic
from mmgrasp.models.assigners.scale_statistic import statistic_path
from mmgrasp.models.detectors.graspnet_baseline import GraspNetBaseline, ScaleBalancedGrasp
from mmgrasp.models.heads.graspnet_heads import DepthCloudCrop, MultiScaleCloudCrop
from mmgrasp.ops.point_ops import cylinder_query, cylinder_queries
from mmgrasp.models.losses.graspnet_loss import GraspNetBaselineLoss, ScaleBalancedGraspLoss
from mmgrasp.registry import MODELS
from mmgrasp.geometry.grasp_frames import generate_grasp_views
from mmgrasp.structures.matched_labels import MatchedLabels

V, A, D = 5, 3, 3  # tests/conftest.py SMALL_GRID
FRAMES = [(0, 1), (0, 4)]  # one frame of each scene, every loss term live at the first step
NUM_POINTS = 1500
HEADS = dict(num_views=V, num_angles=A, num_depths=D,
             crop=dict(type='DepthCloudCrop', nsample=16, channels=(16, 32, 64)),
             operation=dict(type='OperationNet', hidden=32),
             tolerance=dict(type='ToleranceNet', hidden=32))
BL = dict(HEADS, type='GraspNetBaseline',
          backbone=dict(type='PointNet2Backbone', npoints=(256, 128, 64, 32), scale=0.25))
# V = 5 views: a robust-graspable seed needs more than min_views of them
SBG = dict(HEADS, type='ScaleBalancedGrasp',
           backbone=dict(type='PointTransformerLightBackbone', npoints=(256, 128), k=8,
                         scale=0.25),
           crop=dict(type='MultiScaleCloudCrop', nsample=16, channels=(16, 32, 64)),
           assigner=dict(type='ScaleBalancedAssigner', min_views=0))
# BL's label recipe (visible label points, tolerance)
OPTIONS = dict(BL=dict(tolerance=True, visible_only=True), SBG=dict(tolerance=True))


@pytest.fixture(scope='module', autouse=True)
def _scope():
    init_default_scope('mmgrasp')


@pytest.fixture(scope='module')
def datasets(make_dataset):
    return {(name, grids): make_dataset(grids, num_points=NUM_POINTS, **options)
            for name, options in OPTIONS.items() for grids in ('dense', 'deferred')}


@pytest.fixture(scope='module')
def statistic(datasets):
    stat = compute_scale_statistic(datasets[('SBG', 'dense')], num_frames=6)
    # the synthetic boxes (3-8 cm) leave the narrowest width bins empty: raise them to one, as
    # ScaleStatisticHook(min_count=1) does for the demos
    assert sum(stat['num']) > 0
    return dict(stat, num=[max(n, 1) for n in stat['num']])


def _build(cfg, statistic=None):
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    if statistic is not None:
        model.assigner.set_scale_statistic(statistic)
    return model


def _train_step(model, dataset):
    data = model.data_preprocessor(pseudo_collate([dataset[i] for i in FRAMES]), True)
    losses = model(**data, mode='loss')
    sum(losses.values()).backward()
    return losses, {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize('name', ['BL', 'SBG'])
def test_training_step_identical_between_storages(datasets, statistic, name):
    cfg = BL if name == 'BL' else SBG
    runs = {}
    for grids in ('dense', 'deferred'):
        model = _build(cfg, statistic if name == 'SBG' else None)
        runs[grids] = _train_step(model, datasets[(name, grids)])
        parts = model.timer.pop()
        assert set(parts) == {'backbone', 'seed_selection', 'view', 'assigner', 'grouper',
                              'head', 'losses'}
    (dense_losses, dense_grads), (deferred_losses, deferred_grads) = runs.values()
    assert set(dense_losses) == {'loss_objectness', 'loss_view', 'loss_score', 'loss_angle',
                                 'loss_width', 'loss_tolerance'}
    for key, value in dense_losses.items():
        assert torch.isfinite(value), key
        assert torch.equal(value, deferred_losses[key]), key
    # every term is live: the stage-2 and view masks select something
    assert all(v > 0 for v in dense_losses.values()), [k for k, v in dense_losses.items() if v <= 0]
    assert dense_grads.keys() == deferred_grads.keys()
    for key, grad in dense_grads.items():
        assert grad is not None and torch.isfinite(grad).all(), key
        assert torch.equal(grad, deferred_grads[key]), key


@pytest.mark.parametrize('name', ['BL', 'SBG'])
def test_predict_writes_wellformed_grasps(datasets, statistic, name):
    model = _build(BL if name == 'BL' else SBG, statistic if name == 'SBG' else None)
    model.eval()
    dataset = datasets[(name, 'deferred')]
    data = model.data_preprocessor(pseudo_collate([dataset[i] for i in FRAMES]), False)
    with torch.no_grad():
        results = model(**data, mode='predict')
        seeds = model(**data, mode='tensor')['seeds']
    ns = model.backbone.num_seeds
    assert len(results) == len(FRAMES)
    for b, sample in enumerate(results):
        grasps = sample.pred_grasps
        assert grasps.shape == (ns, 17) and torch.isfinite(grasps).all()
        assert sample.metainfo['sample_idx'] == dataset[FRAMES[b]]['data_samples'].sample_idx
        assert ((grasps[:, 1] >= 0) & (grasps[:, 1] <= 0.1)).all()  # width
        assert (grasps[:, 2] == 0.02).all()  # height
        depth_classes = torch.tensor([(d + 1) * 0.01 for d in range(D)])
        assert torch.isin(grasps[:, 3], depth_classes).all()
        rotation = grasps[:, 4:13].reshape(-1, 3, 3)
        eye = torch.eye(3).expand_as(rotation)
        assert torch.allclose(rotation @ rotation.transpose(1, 2), eye, atol=1e-5)
        assert torch.allclose(torch.linalg.det(rotation), torch.ones(ns), atol=1e-5)
        # the approach (first column) is a template view, reversed; the centre is the seed
        to_views = torch.cdist(-rotation[:, :, 0], generate_grasp_views(V))
        assert (to_views.min(dim=1).values < 1e-5).all()
        assert torch.equal(grasps[:, 13:16], seeds[b])
        assert (grasps[:, 16] == -1).all()
        assert sample.pred_objectness.shape == (ns, )
    model.objectness_filter = True
    with torch.no_grad():
        filtered = model(**data, mode='predict')
    for full, kept in zip(results, filtered):
        on_object = full.pred_objectness > 0.5
        assert torch.equal(kept.pred_grasps, full.pred_grasps[on_object])


def test_crop_heights_follow_depths_and_points_lie_in_cylinders():
    assert DepthCloudCrop(num_depths=3).hmax == (0.01, 0.02, 0.03)
    assert DepthCloudCrop().hmax == (0.01, 0.02, 0.03, 0.04)
    with pytest.raises(ValueError, match='hmax'):
        DepthCloudCrop(num_depths=3, hmax=(0.01, 0.02))
    g = torch.Generator().manual_seed(1)
    points = torch.rand(1, 400, 3, generator=g) * 0.1
    centres = points[:, :10]
    rotations = torch.linalg.qr(torch.randn(1, 10, 3, 3, generator=g)).Q
    crop = DepthCloudCrop(num_depths=3, radius=0.03, nsample=8, channels=(4, ))
    local = crop.group(centres, points, rotations)  # (1, 3, 10, D, 8)
    for d, hmax in enumerate(crop.hmax):
        x = local[0, :, :, d]  # (3, 10, 8)
        # the centres are scene points: no crop is empty, every sample is inside
        inside = (x[0] > -0.02) & (x[0] < hmax) & (x[1] ** 2 + x[2] ** 2 < 0.03 ** 2)
        assert inside.all()


def test_multi_scale_grouping_of_all_radii_equals_each_crop_grouping():
    """SBG groups the crops of every radius in one gather and one rotation: bit for bit what
    each radius's own DepthCloudCrop.group gives, and the whole crop (forward and gradients)
    equals the per-radius loop."""
    g = torch.Generator().manual_seed(5)
    points = torch.rand(2, 700, 3, generator=g) * 0.15
    centres = torch.cat([points[:, :20], torch.rand(2, 5, 3, generator=g)], 1)  # some empty
    rotations = torch.linalg.qr(torch.randn(2, 25, 3, 3, generator=g)).Q
    torch.manual_seed(0)
    msc = MultiScaleCloudCrop(in_channels=8, radius=0.06, nsample=16, channels=(4, 8))
    idx = cylinder_queries(points, centres, rotations, [c.radius for c in msc.crops],
                           msc.crops[0].hmin, msc.crops[0].hmax, 16)
    batched = msc.group(centres, points, rotations, idx)
    assert batched.shape == (4, 2, 3, 25, 4, 16)
    for r, crop in enumerate(msc.crops):
        assert torch.equal(batched[r], crop.group(centres, points, rotations, idx[r]))
    seed_features = torch.randn(2, 8, 25, generator=g, requires_grad=True)
    out = msc(centres, points, rotations, seed_features)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in msc.parameters()]
    msc.zero_grad()
    seed_features.grad = None
    loop = torch.cat([crop.embed(crop.group(centres, points, rotations, i))
                      for crop, i in zip(msc.crops, idx)], dim=1)
    B, C, Ns, D = loop.shape
    expected = msc.fuse(loop.view(B, C, Ns * D)).view(B, -1, Ns, D) + \
        (msc.gate(seed_features) * seed_features)[..., None]
    assert torch.equal(out, expected)
    expected.square().sum().backward()
    assert all(torch.equal(p.grad, e) for p, e in zip(msc.parameters(), grads))


def test_multi_scale_crop_recomputes_its_mlps_with_the_same_values_and_less_memory():
    """In training each radius's MLP is recomputed in the backward pass instead of keeping its
    activations: the output, every gradient, the batch-norm running statistics and counters
    equal the kept formulation (each crop's embed called as is) bit for bit, and the counted
    peak of live bytes is lower."""
    import copy

    from mmgrasp.models.utils.live_bytes import LiveBytes
    g = torch.Generator().manual_seed(7)
    points = torch.rand(2, 600, 3, generator=g) * 0.15
    centres = points[:, :40]
    rotations = torch.linalg.qr(torch.randn(2, 40, 3, 3, generator=g)).Q
    feats = torch.randn(2, 16, 40, generator=g)
    torch.manual_seed(0)
    recomputed = MultiScaleCloudCrop(in_channels=16, radius=0.06, nsample=32, channels=(8, 16))
    kept = copy.deepcopy(recomputed)
    kept._embed = lambda crop, local: crop.embed(local)  # the formulation that keeps them

    def step(module):
        seed_features = feats.clone().requires_grad_()
        with LiveBytes() as counter:
            start = counter.live
            out = module(centres, points, rotations, seed_features)
            out.square().sum().backward()
        return out, seed_features.grad, counter.peak - start

    out, feat_grad, peak = step(recomputed)
    out_kept, feat_grad_kept, peak_kept = step(kept)
    assert torch.equal(out, out_kept) and torch.equal(feat_grad, feat_grad_kept)
    assert all(torch.equal(p.grad, q.grad) for p, q in
               zip(recomputed.parameters(), kept.parameters()))
    state, state_kept = recomputed.state_dict(), kept.state_dict()
    assert int(state['crops.0.mlp.1.num_batches_tracked']) == 1
    assert all(torch.equal(v, state_kept[k]) for k, v in state.items())
    assert peak < 0.7 * peak_kept


def test_cylinder_queries_match_a_numpy_query_per_radius_and_height():
    g = torch.Generator().manual_seed(3)
    points = torch.rand(2, 500, 3, generator=g) * 0.2
    centres = torch.rand(2, 30, 3, generator=g) * 0.2  # not scene points: some crops are empty
    rotations = torch.linalg.qr(torch.randn(2, 30, 3, 3, generator=g)).Q
    radii, hmax = (0.01, 0.02, 0.05), (0.01, 0.02, 0.04)
    idx = cylinder_queries(points, centres, rotations, radii, -0.02, hmax, 16)
    assert idx.shape == (3, 3, 2, 30, 16)
    p, c, r = points.numpy(), centres.numpy(), rotations.numpy()
    for b in range(2):
        for s in range(30):
            local = (p[b] - c[b, s]) @ r[b, s]  # rows of Rᵀ(q − c)
            for i, radius in enumerate(radii):
                for d, top in enumerate(hmax):
                    inside = np.flatnonzero((local[:, 0] > -0.02) & (local[:, 0] < top) & (
                        local[:, 1] ** 2 + local[:, 2] ** 2 < radius ** 2))[:16]
                    expected = np.full(16, inside[0] if len(inside) else 0)
                    expected[:len(inside)] = inside
                    np.testing.assert_array_equal(idx[i, d, b, s].numpy(), expected)
    assert torch.equal(idx[1, 2], cylinder_query(0.02, -0.02, 0.04, 16, points, centres,
                                                 rotations))
    assert (idx[0, 0] == 0).all(dim=-1).any()  # an empty crop holds point 0, as pointnet2's


# ---------------------------------------------------------------- losses against the reference
def _huber(error, delta=1.0):
    abs_error = torch.abs(error)
    quadratic = torch.clamp(abs_error, max=delta)
    return 0.5 * quadratic ** 2 + delta * (abs_error - quadratic)


def _reference_bl(end_points, sbg=False, weight=None):
    """graspnet-baseline models/loss.py (and Scale-Balanced-Grasp's weighted variant), written
    over end_points as the reference does."""
    fp2 = end_points['fp2_objectness']
    if sbg:
        labels_all = end_points['batch_grasp_label_all']
        B, Ns = labels_all.shape[:2]
        cnt = (labels_all.view(B, Ns, V, -1).max(3)[0] > 0.1).long().sum(2)
        graspable = (cnt > end_points['min_views']) * fp2
        obj = nn.CrossEntropyLoss()(end_points['objectness_score'], graspable)
        mask = (graspable > 0).unsqueeze(-1).repeat(1, 1, V).float() * \
            weight.unsqueeze(-1).repeat(1, 1, V)
        view = nn.MSELoss(reduction='none')(end_points['view_score'],
                                            end_points['batch_grasp_view_label'])
        view = torch.sum(view * mask) / (mask.sum() + 1e-6)
    else:
        obj = nn.CrossEntropyLoss()(end_points['objectness_score'], fp2)
        mask = (fp2 > 0).unsqueeze(-1).repeat(1, 1, V)
        view = nn.MSELoss(reduction='none')(end_points['view_score'],
                                            end_points['batch_grasp_view_label'])[mask].mean()
    label = end_points['batch_grasp_label']
    inds = torch.argmax(label, dim=2, keepdim=True)
    target = torch.gather(label, 2, inds).squeeze(2)
    widths = torch.gather(end_points['batch_grasp_width'], 2, inds).squeeze(2)
    tol = torch.gather(end_points['batch_grasp_tolerance'], 2, inds).squeeze(2)
    loss_mask = (fp2.bool().unsqueeze(-1).expand_as(target) & (target > 0.1)).float()
    if sbg:
        loss_mask = loss_mask * weight.unsqueeze(-1).expand_as(loss_mask)
        score_mask = loss_mask.max(dim=2)[0].unsqueeze(-1).expand_as(loss_mask)
    else:
        score_mask = loss_mask
    inds_ = inds.transpose(1, 2)
    score = torch.gather(end_points['grasp_score_pred'], 1, inds_).squeeze(1)
    score = torch.sum(_huber(score - target) * score_mask) / (score_mask.sum() + 1e-6)
    angle = nn.CrossEntropyLoss(reduction='none')(end_points['grasp_angle_cls_pred'],
                                                  inds.squeeze(2))
    angle = torch.sum(angle * loss_mask) / (loss_mask.sum() + 1e-6)
    width = torch.gather(end_points['grasp_width_pred'], 1, inds_).squeeze(1)
    width = torch.sum(_huber((width - widths) / 0.1) * loss_mask) / (loss_mask.sum() + 1e-6)
    tolp = torch.gather(end_points['grasp_tolerance_pred'], 1, inds_).squeeze(1)
    tolp = torch.sum(_huber((tolp - tol) / 0.05) * loss_mask) / (loss_mask.sum() + 1e-6)
    return obj + view + 0.2 * (score + angle + width + tolp)


@pytest.mark.parametrize('sbg', [False, True])
def test_losses_equal_reference_formulas(sbg):
    g = torch.Generator().manual_seed(2)
    B, Ns = 2, 12

    def rand(*shape, scale=1.0):
        return torch.rand(*shape, generator=g) * scale

    label_all = torch.where(rand(B, Ns, V, A, D) > 0.4, rand(B, Ns, V, A, D, scale=2.3),
                            torch.zeros(()))
    top_view = torch.randint(0, V, (B, Ns), generator=g)
    at_view = torch.gather(label_all, 2, top_view[..., None, None, None].expand(
        -1, -1, 1, A, D)).squeeze(2)
    fp2 = torch.randint(0, 2, (B, Ns), generator=g)
    weight = 1 + rand(B, Ns, scale=3)
    min_views = 2
    matched = MatchedLabels(
        point=rand(B, Ns, 3), distance=rand(B, Ns), valid=torch.ones(B, Ns, dtype=torch.bool),
        object_index=torch.zeros(B, Ns, dtype=torch.long), row=torch.zeros(B, Ns,
                                                                          dtype=torch.long),
        view_index=torch.zeros(B, Ns, V, dtype=torch.long), view_rot=rand(B, Ns, V, 3, 3),
        scores=rand(B, Ns, V, A, D), score_labels=label_all,
        view_labels=label_all.amax(dim=(-2, -1)), top_view=top_view,
        top_scores=at_view, top_widths=rand(B, Ns, A, D, scale=0.12),
        top_tolerance=rand(B, Ns, A, D, scale=0.05))
    if sbg:
        matched.scale_weight = weight
        matched.robust_graspable = (label_all.amax(dim=(-2, -1)) > 0.1).sum(-1) > min_views
    preds = dict(objectness_score=torch.randn(B, 2, Ns, generator=g),
                 view_score=torch.randn(B, Ns, V, generator=g),
                 grasp_score_pred=torch.randn(B, A, Ns, D, generator=g),
                 grasp_angle_cls_pred=torch.randn(B, A, Ns, D, generator=g),
                 grasp_width_pred=rand(B, A, Ns, D, scale=0.1),
                 grasp_tolerance_pred=rand(B, A, Ns, D, scale=0.05))
    loss_fn = ScaleBalancedGraspLoss() if sbg else GraspNetBaselineLoss()
    losses = loss_fn(preds['objectness_score'], fp2, preds['view_score'],
                     preds['grasp_score_pred'], preds['grasp_angle_cls_pred'],
                     preds['grasp_width_pred'], preds['grasp_tolerance_pred'], matched)
    reference = _reference_bl(dict(preds, fp2_objectness=fp2, batch_grasp_label_all=label_all,
                                   batch_grasp_view_label=matched.view_labels,
                                   batch_grasp_label=at_view,
                                   batch_grasp_width=matched.top_widths,
                                   batch_grasp_tolerance=matched.top_tolerance,
                                   min_views=min_views), sbg=sbg, weight=weight)
    assert torch.allclose(sum(losses.values()), reference, rtol=1e-6, atol=1e-7)
    assert all(v > 0 for v in losses.values())


def test_loss_without_object_seeds_is_finite():
    B, Ns = 1, 4
    matched = MatchedLabels(
        point=torch.zeros(B, Ns, 3), distance=torch.zeros(B, Ns),
        valid=torch.ones(B, Ns, dtype=torch.bool), object_index=torch.zeros(B, Ns).long(),
        row=torch.zeros(B, Ns).long(), view_index=torch.zeros(B, Ns, V).long(),
        view_rot=torch.zeros(B, Ns, V, 3, 3), scores=torch.zeros(B, Ns, V, A, D),
        score_labels=torch.zeros(B, Ns, V, A, D), view_labels=torch.zeros(B, Ns, V),
        top_scores=torch.zeros(B, Ns, A, D), top_widths=torch.zeros(B, Ns, A, D),
        top_tolerance=torch.zeros(B, Ns, A, D))
    losses = GraspNetBaselineLoss()(torch.zeros(B, 2, Ns), torch.zeros(B, Ns).long(),
                                    torch.ones(B, Ns, V), torch.ones(B, A, Ns, D),
                                    torch.ones(B, A, Ns, D), torch.ones(B, A, Ns, D),
                                    torch.ones(B, A, Ns, D), matched)
    assert all(torch.isfinite(v) for v in losses.values())
    assert losses['loss_view'] == 0 and losses['loss_score'] == 0


def test_model_rejects_wrong_grid(datasets):
    model = _build(dict(BL, num_angles=4))
    data = model.data_preprocessor(pseudo_collate([datasets[('BL', 'deferred')][0]]), True)
    with pytest.raises(ValueError, match='num_views/num_angles/num_depths'):
        model(**data, mode='loss')


# ---------------------------------------------------------------- ScaleStatisticHook
def _runner(model, dataset):
    return SimpleNamespace(model=model, train_dataloader=SimpleNamespace(dataset=dataset))


def test_scale_statistic_hook_computes_once_then_reads_cache(datasets, statistic, monkeypatch):
    calls = []
    compute = scale_statistic_module.compute_scale_statistic

    def counting(dataset, num_frames, *args, **kwargs):
        calls.append(num_frames)
        return compute(dataset, num_frames, *args, **kwargs)

    monkeypatch.setattr(scale_statistic_module, 'compute_scale_statistic', counting)
    derived = os.path.join(os.environ['MMGRASP_CACHE'], 'derived')
    before = set(os.listdir(derived)) if os.path.isdir(derived) else set()
    hook = ScaleStatisticHook(num_frames=6, min_count=1)
    weights = []
    for grids, wrap in (('dense', False), ('deferred', False), ('dense', True)):
        assigner = ScaleBalancedAssigner(num_views=V)
        model = SimpleNamespace(assigner=assigner)
        if wrap:  # a DDP-wrapped model: the hook looks at runner.model.module
            model = MMDistributedDataParallel.__new__(MMDistributedDataParallel)
            nn.Module.__init__(model)
            model.module = nn.Module()
            model.module.assigner = assigner
        hook.before_train(_runner(model, datasets[('SBG', grids)]))
        assert assigner.bin_weights is not None
        weights.append(assigner.bin_weights)
    assert calls == [6]  # dense and deferred share the cached file (grids is not in the key)
    new = set(os.listdir(derived)) - before
    assert len(new) == 1 and next(iter(new)).startswith('scale_statistic-')
    expected = ScaleBalancedAssigner(num_views=V, scale_statistic=statistic).bin_weights
    assert all(torch.equal(w, expected) for w in weights)
    # an assigner with a statistic, or another assigner, is left alone
    given = ScaleBalancedAssigner(num_views=V, scale_statistic=dict(statistic, num=[1] * 32))
    hook.before_train(_runner(SimpleNamespace(assigner=given), datasets[('SBG', 'dense')]))
    assert torch.equal(given.bin_weights, torch.ones(32))
    hook.before_train(_runner(SimpleNamespace(assigner=None), datasets[('SBG', 'dense')]))
    assert calls == [6]


def test_scale_statistic_hook_reports_empty_bins(datasets):
    model = SimpleNamespace(assigner=ScaleBalancedAssigner(num_views=V))
    runner = _runner(model, datasets[('BL', 'dense')])
    with pytest.raises(ScaleStatisticError) as err:
        ScaleStatisticHook(num_frames=1).before_train(runner)
    assert 'count more frames (num_frames)' in str(err.value) and '\n' not in str(err.value)
    assert 'min_count=1 (--cfg-options custom_hooks.I.min_count=1)' in str(err.value)
    runner.cfg = dict(custom_hooks=[dict(type='ConfigHashHook'),
                                    dict(type='mmgrasp.ScaleStatisticHook', num_frames=1)])
    with pytest.raises(ScaleStatisticError, match=r'custom_hooks\.1\.min_count=1\)$'):
        ScaleStatisticHook(num_frames=1).before_train(runner)
    ScaleStatisticHook(num_frames=1, min_count=1).before_train(runner)  # a demo's way out
    weights = model.assigner.bin_weights
    assert torch.isfinite(weights).all() and (weights >= 1).all()


def test_models_build_from_the_base_configs():
    from mmengine.config import Config
    root = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'configs', '_base_')
    for name, cls in (('graspnet_baseline', GraspNetBaseline),
                      ('scale_balanced_grasp', ScaleBalancedGrasp)):
        cfg = Config.fromfile(os.path.join(root, 'models', f'{name}.py'))
        model = MODELS.build(cfg.model)
        assert type(model) is cls and model.backbone.num_seeds == 1024
        assert model.crop.out_channels == 256
    data = Config.fromfile(os.path.join(root, 'datasets', 'graspnet_baseline.py'))
    labels = data.train_pipeline[1]
    assert labels.visible_only and labels.tolerance and labels.grids == 'deferred'
    assert tuple(labels.skip_objects) == (18, ) and data.train_pipeline[0].num_points == 20000
    assert math.isclose(data.train_pipeline[2].max_rotation, math.pi / 6)


def test_scale_statistic_hook_in_a_runner(synthetic_root, tmp_path):
    """From custom_hooks, before the first iteration of a real training."""
    from mmengine.runner import Runner
    pipeline = [dict(type='LoadGraspScene', num_points=NUM_POINTS),
                dict(type='SampleGraspLabels', grids='deferred', min_points=10,
                     min_object_points=20, tolerance=True),
                dict(type='PackGraspInputs', keys=('points', 'objectness'))]
    runner = Runner(
        model=SBG, work_dir=str(tmp_path), default_scope='mmgrasp',
        train_dataloader=dict(
            batch_size=2, num_workers=0, sampler=dict(type='EpochAwareSampler', shuffle=True),
            collate_fn=dict(type='pseudo_collate'),
            dataset=dict(type='GraspNetDataset', data_root=synthetic_root, seed=3,
                         pipeline=pipeline)),
        train_cfg=dict(by_epoch=False, max_iters=1),
        optim_wrapper=dict(optimizer=dict(type='Adam', lr=1e-3)),
        custom_hooks=[dict(type='ScaleStatisticHook', num_frames=6, min_count=1)],
        default_hooks=dict(checkpoint=None), randomness=dict(seed=0))
    assert runner.model.assigner.bin_weights is None
    runner.train()
    assert runner.model.assigner.bin_weights is not None
    recipe = dict(scale_statistic_recipe(runner.train_dataloader.dataset), num_frames=6)
    assert os.path.isfile(statistic_path(recipe))
    assert statistic_path(recipe).startswith(os.path.join(os.environ['MMGRASP_CACHE'],
                                                          'derived'))
