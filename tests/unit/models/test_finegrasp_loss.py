"""FineGrasp's loss: the seven classes its GraspNet-1Billion config builds (RoboOrchardLab
@241bbc6 ``robo_orchard_lab/models/finegrasp/losses.py``: ObjectnessLoss 1, GraspnessLoss 10,
ViewLoss 100, AngleLoss 1, DepthLoss 1, ScoreClsLoss 1, WidthLoss 10 in
``config_finegrasp_minkunet.py``), ported to numpy here, against the loss FineGrasp's config
builds (EconomicGraspLoss: the same terms); mutants of each formula are told apart."""
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config

from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.apis import register_all_modules

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
register_all_modules(False)
B, N, NS, V = 2, 80, 48, 20
CONFIG_WEIGHTS = dict(objectness=1, graspness=10, view=100, angle=1, depth=1, score=1, width=10)


def finegrasp_loss():
    cfg = Config.fromfile(os.path.join(REPO, 'configs', '_base_', 'models', 'finegrasp.py'))
    return build_in_scope(MODELS, cfg.model.loss)


def _ce(logits, labels):
    """nn.CrossEntropyLoss(reduction='none') over dim 1, float64."""
    x = logits.astype(np.float64)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1)) + m[:, 0]
    return lse - np.take_along_axis(x, labels[:, None], 1)[:, 0]


def _sl1(a, b):
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return np.where(d < 1.0, 0.5 * d * d, d - 0.5)


def reference(p, mutant=''):
    """end_points after the seven loss modules, as losses.py computes them."""
    out = {}
    out['objectness'] = 1 * _ce(p['objectness_score'], p['objectness_label']).mean()
    mask = p['objectness_label'].astype(bool)
    g = _sl1(p['graspness_score'], p['graspness_label'])
    out['graspness'] = 10 * (g.mean() if mutant == 'graspness_all' else
                             (g[mask].mean() if mask.any() else np.nan))
    out['view'] = 100 * _sl1(p['view_score'], p['view_label']).mean()
    valid = p['valid']

    def masked(loss):  # `0 * sum(loss)` without valid seeds, else loss[valid].mean()
        return 0.0 if valid.sum() == 0 else loss[valid].mean()

    angle = _ce(p['angle'], p['rot_label'].astype(np.int64))
    out['angle'] = 1 * (angle.mean() if mutant == 'angle_unmasked' else masked(angle))
    out['depth'] = 1 * masked(_ce(p['depth'], p['depth_label'].astype(np.int64)))
    s32 = p['score_label'].astype(np.float32)
    cls = (s32 * np.float32(10) / np.float32(2)).astype(np.int64)  # .long(): truncation
    if mutant == 'score_round':
        cls = np.round(s32 * np.float32(5)).astype(np.int64)
    out['score'] = 1 * masked(_ce(p['score'], cls))
    target = p['width_label'] * (1 if mutant == 'width_plain' else 10)
    out['width'] = 10 * masked(_sl1(p['width'], target))
    if mutant == 'view_weight_10':
        out['view'] /= 10
    return {f'loss_{k}': v for k, v in out.items()}


def make(seed=0, objects=True, valid_fraction=0.5):
    r = np.random.default_rng(seed)
    valid = r.random((B, NS)) < valid_fraction
    return dict(
        objectness_score=r.normal(size=(B, 2, N)).astype(np.float32),
        objectness_label=(r.random((B, N)) < 0.5).astype(np.int64) * objects,
        graspness_score=r.normal(0.2, 1.4, (B, N)).astype(np.float32),
        graspness_label=r.random((B, N)).astype(np.float32),
        view_score=r.normal(0.3, 0.9, (B, NS, V)).astype(np.float32),
        view_label=r.random((B, NS, V)).astype(np.float32),
        angle=r.normal(size=(B, 13, NS)).astype(np.float32),
        depth=r.normal(size=(B, 5, NS)).astype(np.float32),
        score=r.normal(size=(B, 6, NS)).astype(np.float32),
        width=r.normal(0.5, 0.9, (B, NS)).astype(np.float32),
        rot_label=np.where(valid, r.integers(0, 12, (B, NS)), 12).astype(np.int32),
        depth_label=np.where(valid, r.integers(0, 4, (B, NS)), 4).astype(np.int32),
        # stored scores: uint8 / 10 (1.1 − μ on the 0.1 grid; 0.3 and 0.7 are float32 edges)
        score_label=np.where(valid, r.integers(1, 11, (B, NS)) / np.float32(10),
                             0).astype(np.float32),
        width_label=np.where(valid, r.integers(5, 101, (B, NS)) / np.float32(1000),
                             0.1).astype(np.float32),
        valid=valid)


def ours(p, loss=None, grad=False):
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in p.items()}
    leaves = ['objectness_score', 'graspness_score', 'view_score', 'angle', 'depth', 'score',
              'width']
    for k in leaves:
        t[k].requires_grad_(grad)
    targets = dict(batch_grasp_view_graspness=t['view_label'],
                   batch_grasp_rotations=t['rot_label'], batch_grasp_depth=t['depth_label'],
                   batch_grasp_score=t['score_label'], batch_grasp_width=t['width_label'],
                   batch_valid_mask=t['valid'])
    out = (loss or finegrasp_loss())(
        t['objectness_score'], t['graspness_score'], t['objectness_label'],
        t['graspness_label'], t['view_score'],
        dict(angle=t['angle'], depth=t['depth'], score=t['score'], width=t['width']), targets)
    return out, [t[k] for k in leaves]


@pytest.mark.parametrize('seed', [0, 1])
def test_every_term_equals_the_finegrasp_reference(seed):
    p = make(seed)
    mine, _ = ours(p)
    ref = reference(p)
    assert set(mine) == set(ref)
    for k, v in ref.items():
        assert float(mine[k].detach()) == pytest.approx(v, rel=1e-5, abs=1e-7), k
        assert v > 0, k


@pytest.mark.parametrize('mutant,term', [
    ('graspness_all', 'loss_graspness'), ('angle_unmasked', 'loss_angle'),
    ('score_round', 'loss_score'), ('width_plain', 'loss_width'),
    ('view_weight_10', 'loss_view')])
def test_mutants_are_told_apart(mutant, term):
    p = make(3)
    mine, _ = ours(p)
    assert not np.isclose(float(mine[term].detach()), reference(p, mutant)[term], rtol=1e-3)


def test_config_weights_are_the_reference_config():
    assert finegrasp_loss().weights == CONFIG_WEIGHTS


@pytest.mark.parametrize('objects,valid_fraction', [(False, 0.5), (True, 0.0), (False, 0.0)])
def test_degenerate_batches_are_finite(objects, valid_fraction):
    """Without object points the reference's graspness is NaN (mean of nothing); here 0 with
    a zero gradient; without valid seeds the four grasp terms are 0 as in the reference."""
    p = make(4, objects, valid_fraction)
    mine, leaves = ours(p, grad=True)
    total = sum(mine.values())
    total.backward()
    assert torch.isfinite(total)
    assert all(torch.isfinite(x.grad).all() for x in leaves)
    ref = reference(p)
    for k, v in ref.items():
        if np.isnan(v):
            assert float(mine[k].detach()) == 0, k
        else:
            assert float(mine[k].detach()) == pytest.approx(v, rel=1e-5, abs=1e-7), k
