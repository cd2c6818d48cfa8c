"""Degenerate batches give finite losses and finite gradients in each of the three recipes
(GSNet, GraspNet-baseline, Scale-Balanced-Grasp).

Each case starts from real frames of the session's synthetic dataset (dense grids) and changes
their labels in memory (on copies: the session's files are never written). What each
degenerate path does, and why, is documented where it is handled:
``NearestLabelAssigner.assign``/``match_view``, ``GSNetLoss``, ``GraspNetBaselineLoss``,
``ScaleBalancedGraspLoss`` and ``GSNet._seed_stage``.
"""
import dataclasses

import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope

from mmgrasp.registry import MODELS

V, A, D = 5, 3, 3  # tests/conftest.py SMALL_GRID
FRAMES = [(0, 0), (0, 4)]  # one frame of each scene
HEADS = dict(num_views=V, num_angles=A, num_depths=D,
             crop=dict(type='DepthCloudCrop', nsample=16, channels=(16, 32)),
             operation=dict(type='OperationNet', hidden=16),
             tolerance=dict(type='ToleranceNet', hidden=16))
RECIPES = dict(
    GSNet=dict(type='GSNet', num_seeds=32, num_views=V, num_angles=A, num_depths=D,
               backbone=dict(type='SparseUNet14', channels=(8,) * 8, out_channels=16),
               crop=dict(channels=(16, )),
               assigner=dict(type='NearestLabelAssigner', num_views=V)),
    BL=dict(HEADS, type='GraspNetBaseline',
            backbone=dict(type='PointNet2Backbone', npoints=(128, 32, 16, 8), scale=0.25)),
    SBG=dict(HEADS, type='ScaleBalancedGrasp',
             backbone=dict(type='PointTransformerLightBackbone', npoints=(128, 32), k=8,
                           scale=0.25),
             crop=dict(type='MultiScaleCloudCrop', nsample=16, channels=(16, 64)),
             assigner=dict(type='ScaleBalancedAssigner', min_views=1)))
# a statistic with every width bin filled (SBG's 33 edges from 0.003 to 0.1 m)
STATISTIC = dict(interval=torch.linspace(0.003, 0.1, 33).tolist(),
                 num=[float(n) for n in range(1, 33)])


@pytest.fixture(scope='module', autouse=True)
def _scope():
    init_default_scope('mmgrasp')


@pytest.fixture(scope='module')
def frames(make_dataset):
    dataset = make_dataset('dense', num_points=600, tolerance=True)
    return [dataset[i] for i in FRAMES]


def build(recipe: str, **overrides):
    torch.manual_seed(0)
    cfg = dict(RECIPES[recipe])
    for key, value in overrides.items():
        cfg[key] = dict(cfg[key], **value) if isinstance(value, dict) else value
    model = MODELS.build(cfg)
    if recipe == 'SBG':
        model.assigner.set_scale_statistic(STATISTIC)
    return model


def copy_frames(frames, edit=None):
    """Fresh copies of the frames (labels cloned, never views of the dataset's arrays);
    ``edit(b, k, label)`` returns a changed label, or None to drop it."""
    out = []
    for b, item in enumerate(frames):
        sample = item['data_samples'].clone()
        labels = []
        for k, label in enumerate(item['data_samples'].grasp_labels):
            grids = {name: getattr(label, name).clone() for name in
                     ('points', 'pose', 'scores', 'widths', 'collision', 'tolerance')
                     if getattr(label, name) is not None}
            label = dataclasses.replace(label, **grids)
            label = edit(b, k, label) if edit else label
            if label is not None:
                labels.append(label)
        sample.grasp_labels = labels
        out.append(dict(inputs={k: v.clone() for k, v in item['inputs'].items()},
                        data_samples=sample))
    return out


def assert_finite_step(model, items, edit_inputs=None):
    """One training step: every loss term and every gradient that reaches a weight is finite;
    returns the losses."""
    data = model.data_preprocessor(pseudo_collate(items), True)
    if edit_inputs is not None:
        edit_inputs(data['inputs'])
    model.train()
    losses = model(**data, mode='loss')
    for key, value in losses.items():
        assert torch.isfinite(value).all(), (key, value)
    model.zero_grad()
    sum(losses.values()).backward()
    bad = [n for n, p in model.named_parameters()
           if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not bad, bad
    reached = [n for n, p in model.named_parameters() if p.grad is not None]
    assert reached  # the step trains something
    return losses


def with_scores(label, scores):
    return dataclasses.replace(label, scores=scores)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_frame_without_labelled_objects(frames, recipe):
    """Frame 1 keeps no labelled object: its seeds are not valid (no label point in their
    frame), read μ = 0 and train only the objectness/graspness terms."""
    items = copy_frames(frames, lambda b, k, label: None if b == 1 else label)
    assert assert_finite_step(build(recipe), items)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_object_whose_kept_rows_have_no_valid_cell(frames, recipe):
    """Object 0 of frame 0: every cell infeasible (μ = −1), the other objects unchanged."""
    items = copy_frames(frames, lambda b, k, label: with_scores(
        label, torch.full_like(label.scores, -1)) if (b, k) == (0, 0) else label)
    assert_finite_step(build(recipe), items)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_no_positive_mu_at_any_chosen_view(frames, recipe):
    """No μ > 0 anywhere in the batch (so none at the chosen views): GSNet's normalisation has
    no u_min (the NaN of ln(0/0) before the fix), BL's ln(u_max/μ) has no positive u_max; all
    score targets are 0 and the masked terms are 0."""
    items = copy_frames(frames, lambda b, k, label: with_scores(
        label, torch.where(label.scores > 0, torch.zeros_like(label.scores), label.scores)))
    losses = assert_finite_step(build(recipe), items)
    if recipe != 'GSNet':
        assert losses['loss_angle'] == 0 and losses['loss_width'] == 0


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_every_positive_mu_masked_by_width(frames, recipe):
    """Every width above GRASP_MAX_WIDTH: the width mask removes every positive μ."""
    items = copy_frames(frames, lambda b, k, label: dataclasses.replace(
        label, widths=torch.full_like(label.widths, 0.2)))
    assert_finite_step(build(recipe), items)


def test_degenerate_nothing_graspable_gsnet(frames):
    """No point passes GSNet's graspable mask (objectness argmax 0 everywhere): the seeds are
    drawn from all points."""
    model = build('GSNet')
    with torch.no_grad():
        model.graspable_head.conv.bias[:2] = torch.tensor([100.0, -100.0])
    assert_finite_step(model, copy_frames(frames))


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_all_seeds_on_the_background(frames, recipe):
    """Objectness labels all 0 (and graspness 0): the masked terms over objects are empty and
    give 0 (the means over empty masks are Σ/(Σmask + 1e-6) or an explicit 0)."""

    def background(inputs):
        inputs['objectness'].zero_()
        if 'graspness' in inputs:
            inputs['graspness'].zero_()

    assert_finite_step(build(recipe), copy_frames(frames), background)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_one_object_in_the_batch(frames, recipe):
    items = copy_frames(frames, lambda b, k, label: label if (b, k) == (0, 0) else None)
    assert sum(len(i['data_samples'].grasp_labels) for i in items) == 1
    assert_finite_step(build(recipe), items)


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_degenerate_one_seed_per_frame(frames, recipe):
    """GSNet and SBG with one seed per frame; BL with its fewest, two (its PointNet++ has at
    least one SA level above the seeds, and SA levels must shrink)."""
    overrides = dict(
        GSNet=dict(num_seeds=1),
        BL=dict(backbone=dict(npoints=(2, 1), radii=(0.04, 0.1), nsamples=(16, 16),
                              sa_mlps=((64, 64, 128), (128, 128, 256)), fp_mlps=((256, 256), ))),
        SBG=dict(backbone=dict(npoints=(8, 1), k=1)))[recipe]
    model = build(recipe, **overrides)
    if recipe == 'BL':
        assert model.backbone.num_seeds == 2
    assert_finite_step(model, copy_frames(frames))


@pytest.mark.parametrize('recipe', ['BL', 'SBG'])
def test_degenerate_tolerance_all_zero(frames, recipe):
    """GSNet has no tolerance; BL/SBG regress a zero tolerance target."""
    items = copy_frames(frames, lambda b, k, label: dataclasses.replace(
        label, tolerance=torch.zeros_like(label.tolerance)))
    assert_finite_step(build(recipe), items)
