"""EconomicGraspLoss term by term against a numpy port of EconomicGrasp's
``models/loss_economicgrasp.py`` (@7361bb6, weights of ``utils/arguments.py``), with the
mutants that comparison catches, and finite values and gradients on degenerate batches."""
import numpy as np
import pytest
import torch

from mmgrasp.models.losses import EconomicGraspLoss

B, N, NS, V, A, D = 2, 64, 40, 30, 12, 4
WEIGHTS = dict(objectness=1, graspness=10, view=100, angle=1, depth=1, score=1, width=10)


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(B, C, n), (B, n) -> (B, n) per-element cross-entropy, in float64."""
    logits = logits.astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
    picked = np.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return log_norm - picked


def _smooth_l1(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    diff = np.abs(pred.astype(np.float64) - target.astype(np.float64))
    return np.where(diff < 1, 0.5 * diff ** 2, diff - 0.5)


def reference_losses(p: dict, mutant: str = '') -> dict:
    """The reference's get_loss, written from loss_economicgrasp.py. ``mutant`` names a wrong
    variant (for the mutation tests): 'score_label_round', 'score_label_x10',
    'width_target_plain', 'view_masked', 'graspness_unmasked'."""
    obj = _cross_entropy(p['objectness_logits'], p['objectness_label']).mean()
    on_object = p['objectness_label'].astype(bool)
    grasp_l = _smooth_l1(p['graspness_pred'], p['graspness_label'])
    if mutant == 'graspness_unmasked':
        grasp = grasp_l.mean()
    else:  # loss[mask].mean(): NaN without object points in the reference
        grasp = grasp_l[on_object].mean() if on_object.any() else np.nan
    valid = p['valid']
    view_l = _smooth_l1(p['view_scores'], p['view_label'])
    view = view_l[valid].mean() if mutant == 'view_masked' else view_l.mean()
    score32 = p['score_label'].astype(np.float32)
    if mutant == 'score_label_round':
        score_cls = np.round(score32 * np.float32(10) / np.float32(2)).astype(np.int64)
    elif mutant == 'score_label_x10':
        score_cls = np.minimum((score32 * np.float32(10)).astype(np.int64), 5)
    else:  # torch's .long() truncates toward zero, on float32 values
        score_cls = np.trunc(score32 * np.float32(10) / np.float32(2)).astype(np.int64)
    width_target = p['width_label'] * (1 if mutant == 'width_target_plain' else 10)
    per_seed = dict(
        angle=_cross_entropy(p['angle'], p['rotation_label']),
        depth=_cross_entropy(p['depth'], p['depth_label']),
        score=_cross_entropy(p['score'], score_cls),
        width=_smooth_l1(p['width'], width_target))
    # the reference: 0 * sum(loss) where no seed is valid, else the masked mean
    masked = {k: (v[valid].mean() if valid.any() else 0.0) for k, v in per_seed.items()}
    terms = dict(objectness=obj, graspness=grasp, view=view, **masked)
    return {f'loss_{k}': WEIGHTS[k] * v for k, v in terms.items()}


def batch(seed: int = 0, objects: bool = True, valid_fraction: float = 0.5) -> dict:
    rng = np.random.default_rng(seed)
    valid = rng.random((B, NS)) < valid_fraction
    # scores 1.1 - mu on the label grid of mu (0.1 .. 1.0), stored as uint8 / 10; 0 unmatched
    score = np.where(valid, rng.integers(1, 11, (B, NS)) / np.float32(10), 0).astype(np.float32)
    return dict(
        objectness_logits=rng.normal(size=(B, 2, N)).astype(np.float32),
        graspness_pred=rng.normal(0.3, 1.5, (B, N)).astype(np.float32),
        objectness_label=(rng.random((B, N)) < 0.4).astype(np.int64) * objects,
        graspness_label=rng.random((B, N)).astype(np.float32),
        view_scores=rng.normal(0.4, 0.8, (B, NS, V)).astype(np.float32),
        view_label=rng.random((B, NS, V)).astype(np.float32),
        angle=rng.normal(size=(B, A + 1, NS)).astype(np.float32),
        depth=rng.normal(size=(B, D + 1, NS)).astype(np.float32),
        score=rng.normal(size=(B, 6, NS)).astype(np.float32),
        # widths as 10 x metres would be predicted: around 0.2 .. 1 (with a few far off)
        width=rng.normal(0.6, 0.8, (B, NS)).astype(np.float32),
        rotation_label=np.where(valid, rng.integers(0, A, (B, NS)), A).astype(np.int32),
        depth_label=np.where(valid, rng.integers(0, D, (B, NS)), D).astype(np.int32),
        score_label=score,
        width_label=np.where(valid, rng.integers(10, 101, (B, NS)) / np.float32(1000),
                             0.1).astype(np.float32),
        valid=valid)


def run(p: dict, loss=None, requires_grad: bool = False):
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in p.items()}
    preds = ('objectness_logits', 'graspness_pred', 'view_scores', 'angle', 'depth', 'score',
             'width')
    for k in preds:
        t[k].requires_grad_(requires_grad)
    targets = dict(batch_grasp_view_graspness=t['view_label'],
                   batch_grasp_rotations=t['rotation_label'], batch_grasp_depth=t['depth_label'],
                   batch_grasp_score=t['score_label'], batch_grasp_width=t['width_label'],
                   batch_valid_mask=t['valid'])
    grasp_pred = dict(angle=t['angle'], depth=t['depth'], score=t['score'], width=t['width'])
    out = (loss or EconomicGraspLoss(**WEIGHTS))(
        t['objectness_logits'], t['graspness_pred'], t['objectness_label'],
        t['graspness_label'], t['view_scores'], grasp_pred, targets)
    return out, [t[k] for k in preds]


def _close(ours: dict, ref: dict) -> bool:
    return all(np.isclose(float(ours[k]), ref[k], rtol=1e-5, atol=1e-7) for k in ref)


@pytest.mark.parametrize('seed', (0, 1))
def test_terms_equal_reference(seed):
    p = batch(seed)
    ours, _ = run(p)
    ref = reference_losses(p)
    assert set(ours) == set(ref)
    for k in ref:
        assert float(ours[k]) == pytest.approx(ref[k], rel=1e-5, abs=1e-7), k
        assert ref[k] > 0, k  # every term live: a wrong mask or scale shows


def test_defaults_are_the_published_weights():
    p = batch(2)
    assert _close(run(p, EconomicGraspLoss())[0], reference_losses(p))


@pytest.mark.parametrize('mutant,term', [
    ('score_label_round', 'loss_score'), ('score_label_x10', 'loss_score'),
    ('width_target_plain', 'loss_width'), ('view_masked', 'loss_view'),
    ('graspness_unmasked', 'loss_graspness')])
def test_mutants_are_caught(mutant, term):
    """Each wrong formula gives another value on this batch, so the check above rejects it."""
    p = batch(3)
    ours, _ = run(p)
    wrong = reference_losses(p, mutant)
    assert not np.isclose(float(ours[term]), wrong[term], rtol=1e-3), mutant


@pytest.mark.parametrize('term', sorted(WEIGHTS))
def test_wrong_weight_is_caught_and_each_weight_counts(term):
    p = batch(4)
    mutated = EconomicGraspLoss(**{**WEIGHTS, term: WEIGHTS[term] * 2 + 1})
    out, _ = run(p, mutated)
    ref = reference_losses(p)
    assert not np.isclose(float(out[f'loss_{term}']), ref[f'loss_{term}'], rtol=1e-3)
    others = {k: v for k, v in ref.items() if k != f'loss_{term}'}
    assert _close(out, others)


def test_score_label_truncates_float32_products():
    """0.3 * 10 / 2 in float32 is 1.4999999 (class 1, not 2), 0.7 -> 3, 1.0 -> 5: the reference
    truncates the float32 product; the loss sees those classes."""
    assert (torch.tensor([0.3, 0.7, 1.0]) * 10 / 2).long().tolist() == [1, 3, 5]
    p = batch(5)
    p['score_label'][:] = np.float32(0.3)
    p['valid'][:] = True
    ours, _ = run(p)
    assert float(ours['loss_score']) == pytest.approx(reference_losses(p)['loss_score'],
                                                      rel=1e-5)


@pytest.mark.parametrize('objects,valid_fraction', [(False, 0.5), (True, 0.0), (False, 0.0)])
def test_degenerate_batches_are_finite(objects, valid_fraction):
    """No point on an object and/or no valid seed: the masked terms are 0 with zero,
    finite gradients (the reference gives NaN for graspness without object points)."""
    p = batch(6, objects=objects, valid_fraction=valid_fraction)
    out, leaves = run(p, requires_grad=True)
    total = sum(out.values())
    total.backward()
    out = {k: v.detach() for k, v in out.items()}
    assert torch.isfinite(total)
    assert all(torch.isfinite(leaf.grad).all() for leaf in leaves)
    if not objects:
        assert float(out['loss_graspness']) == 0
        assert not leaves[1].grad.any()
    if valid_fraction == 0:
        for k in ('angle', 'depth', 'score', 'width'):
            assert float(out[f'loss_{k}']) == 0
        ref = reference_losses(p)
        assert _close(out, {k: v for k, v in ref.items() if k != 'loss_graspness'})
