"""HGGD's losses and label assignment against numpy implementations written from the rules
(with mutants that must fail) and against the reference functions themselves
(tests/data/hggd_golden/losses.npz, labels.npz: THU-VCLab/HGGD@69580ff run on the CPU by
tools/analysis/golden/make_hggd_golden.py)."""
import math
import os

import numpy as np
import pytest
import torch

from mmgrasp.models.losses.hggd_loss import (HGGDLoss, focal_loss, local_labels, match_labels,
                                             offset_loss, quaternions_xyz)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'hggd_golden')


def golden(name: str):
    return np.load(os.path.join(GOLDEN, f'{name}.npz'))


# ---- numpy, from the rules ----

def np_focal(x, t, thres=0.99, alpha=0.5, gamma=2.0, suppress=False, normaliser='pos'):
    p = np.clip(1 / (1 + np.exp(-x.astype(np.float64))), 1e-6, 1 - 1e-6)
    pos, neg = t >= thres, t < thres
    lp = alpha * np.log(p) * (1 - p) ** gamma * pos
    ln = (1 - alpha) * np.log(1 - p) * p ** gamma * neg * ((1 - t) ** 4 if suppress else 1)
    n = pos.sum() if normaliser == 'pos' else t.size
    return -(lp.sum() + ln.sum()) / max(n, 1)


def np_smooth_l1(a, b):
    d = np.abs(a - b)
    return np.where(d < 1, 0.5 * d * d, d - 0.5).sum()


def np_offsets(preds, targets, mask, clamp=0.5):
    m = (mask > 0).astype(np.float64)
    return np.mean([np_smooth_l1(np.clip(p, -clamp, clamp) * m, t * m) / (m.sum() + 1e-6)
                    for p, t in zip(preds, targets)])


def np_quaternion(euler, order='xyz'):
    """Rotation matrix Rx(θ) Ry(γ) Rz(β) (or another order), then its quaternion by the
    trace method: independent of the code's Euler product."""
    out = []
    for a, b, c in euler.reshape(-1, 3):
        rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
        ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
        rz = np.array([[np.cos(c), -np.sin(c), 0], [np.sin(c), np.cos(c), 0], [0, 0, 1]])
        r = rx @ ry @ rz if order == 'xyz' else rz @ ry @ rx
        w = np.sqrt(max(0, 1 + np.trace(r))) / 2
        x = np.sqrt(max(0, 1 + r[0, 0] - r[1, 1] - r[2, 2])) / 2 * np.sign(r[2, 1] - r[1, 2] or 1)
        y = np.sqrt(max(0, 1 - r[0, 0] + r[1, 1] - r[2, 2])) / 2 * np.sign(r[0, 2] - r[2, 0] or 1)
        z = np.sqrt(max(0, 1 - r[0, 0] - r[1, 1] + r[2, 2])) / 2 * np.sign(r[1, 0] - r[0, 1] or 1)
        out.append([w, x, y, z])
    return np.array(out).reshape(*euler.shape[:-1], 4)


def np_local_labels(thetas, anchors, labels, offsets, flip=True, order='xyz'):
    """Per region: soft label 1 - min_l (1 - |q_a . q_l|) over its labels (with the gripper
    flip (θ + π, -γ, -β)), and the offset of the first nearest label."""
    soft = np.zeros((len(thetas), len(anchors)))
    off = np.zeros((len(thetas), len(anchors), 3))
    for i, theta in enumerate(thetas):
        if len(labels[i]) == 0:
            continue
        q_l = np_quaternion(labels[i], order)
        for j, (g, b) in enumerate(anchors):
            a = np.array([theta, g, b])
            dots = np.abs(q_l @ np_quaternion(a[None], order)[0])
            if flip:
                dots = np.maximum(dots, np.abs(q_l @ np_quaternion(
                    np.array([[theta + np.pi, -g, -b]]), order)[0]))
            d = 1 - dots
            soft[i, j] = 1 - d.min()
            off[i, j] = offsets[i][np.argmin(d)]
    return soft, off


# ---- focal and offset losses ----

@pytest.mark.parametrize('kwargs,np_kwargs', [
    (dict(neg_suppress=True), dict(suppress=True)),
    (dict(thres=0.5, alpha=0.25), dict(thres=0.5, alpha=0.25)),
    ({}, {})])
def test_focal_loss_equals_numpy_and_mutants_differ(kwargs, np_kwargs):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 1, 20, 12, generator=gen, dtype=torch.float64) * 3
    t = torch.rand(3, 1, 20, 12, generator=gen, dtype=torch.float64) ** 3
    t[0, 0, 2, 3] = t[2, 0, 7, 1] = 1.0
    for targets in (t, t * 0.4):  # with positives, and none (normaliser 1)
        ours = float(focal_loss(x, targets, **kwargs))
        assert ours == pytest.approx(np_focal(x.numpy(), targets.numpy(), **np_kwargs), rel=1e-10)
    base = np_focal(x.numpy(), t.numpy(), **np_kwargs)
    thres, alpha = np_kwargs.get('thres', 0.99), np_kwargs.get('alpha', 0.5)
    mutants = [dict(np_kwargs, alpha=alpha + 0.2), dict(np_kwargs, gamma=1.0),
               dict(np_kwargs, normaliser='all'), dict(np_kwargs, thres=thres - 0.2),
               dict(np_kwargs, suppress=not np_kwargs.get('suppress', False))]
    for mutant in mutants:
        assert abs(np_focal(x.numpy(), t.numpy(), **mutant) - base) > 1e-3 * abs(base), mutant


def test_focal_and_offset_losses_equal_the_reference():
    g = golden('losses')
    x, t = torch.from_numpy(g['focal_logits']), torch.from_numpy(g['focal_targets'])
    for name, kwargs in (('loc', dict(neg_suppress=True)), ('cls', dict(thres=0.5, alpha=0.25)),
                         ('plain', {})):
        assert float(focal_loss(x, t, **kwargs)) == pytest.approx(float(g[f'focal_{name}']),
                                                                   rel=1e-5)
        assert float(focal_loss(x, t * 0.5, **kwargs)) == pytest.approx(
            float(g[f'focal_{name}_nopos']), rel=1e-5)
    preds = list(torch.from_numpy(g['reg_preds']))
    targets = list(torch.from_numpy(g['reg_targets']))
    mask = torch.from_numpy(g['cls_mask'])
    assert float(offset_loss(preds, targets, mask)) == pytest.approx(float(g['offset_reg']),
                                                                     rel=1e-5)
    assert float(offset_loss(preds, targets, mask)) == pytest.approx(
        np_offsets([p.numpy() for p in preds], [t.numpy() for t in targets], mask.numpy()),
        rel=1e-5)
    # the clamp inside the loss matters (mutant: none), and so does the mask
    assert abs(np_offsets([p.numpy() for p in preds], [t.numpy() for t in targets],
                          mask.numpy(), clamp=10) - float(g['offset_reg'])) > 1e-3
    out = dict(loc_map=torch.from_numpy(g['anchor_loc_logits']),
               cls_mask=torch.from_numpy(g['anchor_cls_logits']),
               theta_offset=preds[0][..., :3], depth_offset=preds[1][..., :3],
               width_offset=preds[2][..., :3])
    target = dict(loc_map=torch.from_numpy(g['anchor_loc_target']), cls_mask=mask[..., :3],
                  theta_offset=targets[0][..., :3], depth_offset=targets[1][..., :3],
                  width_offset=targets[2][..., :3])
    losses = HGGDLoss().anchor_losses(out, target)
    for ours, theirs in (('loss_loc', 'loc_map_loss'), ('loss_reg', 'reg_loss'),
                         ('loss_cls', 'cls_loss')):
        assert float(losses[ours]) == pytest.approx(float(g[f'anchor_{theirs}']), rel=1e-5)
    assert float(sum(losses.values())) == pytest.approx(float(g['anchor_loss']), rel=1e-5)


def test_loss_weights_scale_their_terms():
    gen = torch.Generator().manual_seed(1)
    out = {k: torch.randn(2, 6, 4, 3, generator=gen) for k in
           ('cls_mask', 'theta_offset', 'depth_offset', 'width_offset')}
    out['loc_map'] = torch.randn(2, 1, 32, 24, generator=gen)
    target = {k: torch.rand(v.shape, generator=gen) for k, v in out.items()}
    base = HGGDLoss(1, 1, 1, 1).anchor_losses(out, target)
    scaled = HGGDLoss(2, 3, 4, 1).anchor_losses(out, target)
    for key, w in (('loss_loc', 2), ('loss_reg', 3), ('loss_cls', 4)):
        assert float(scaled[key]) == pytest.approx(w * float(base[key]), rel=1e-6)
    pred, offset = torch.randn(5, 49, generator=gen), torch.randn(5, 49, 3, generator=gen)
    soft = torch.rand(5, 49, generator=gen, dtype=torch.float64) ** 0.01
    labels = torch.randn(5, 49, 3, generator=gen, dtype=torch.float64) * 0.01
    one = HGGDLoss(offset_weight=1).local_losses(pred, offset, soft, labels)
    five = HGGDLoss(offset_weight=5).local_losses(pred, offset, soft, labels)
    assert float(one['loss_offset']) > 0
    assert float(five['loss_offset']) == pytest.approx(5 * float(one['loss_offset']), rel=1e-6)
    strict = HGGDLoss(label_thres=0.5).local_losses(pred, offset, soft, labels)
    assert float(strict['loss_multi_cls']) != pytest.approx(float(one['loss_multi_cls']))


def test_local_losses_equal_numpy():
    gen = torch.Generator().manual_seed(2)
    pred, offset = torch.randn(6, 49, generator=gen), torch.randn(6, 49, 3, generator=gen)
    soft = torch.rand(6, 49, generator=gen, dtype=torch.float64) ** 0.005
    labels = torch.randn(6, 49, 3, generator=gen, dtype=torch.float64) * 0.02
    losses = HGGDLoss().local_losses(pred, offset, soft, labels)
    s = soft.float().numpy()
    assert float(losses['loss_multi_cls']) == pytest.approx(np_focal(pred.numpy(), s), rel=1e-5)
    m = (s > 0.99)[..., None].astype(np.float64)
    target = labels.float().numpy() / 0.02 * m
    expected = np_smooth_l1(offset.numpy() * m, target) / (m.sum() + 1e-6)
    assert 0 < m.sum() < m.size
    assert float(losses['loss_offset']) == pytest.approx(expected, rel=1e-5)
    mutant = np_smooth_l1(offset.numpy() * m, labels.numpy() * m) / (m.sum() + 1e-6)  # no ÷ 0.02
    assert abs(mutant - expected) > 1e-3 * expected


# ---- label assignment ----

def test_quaternions_are_the_rotations_xyz():
    gen = torch.Generator().manual_seed(3)
    euler = (torch.rand(50, 3, generator=gen, dtype=torch.float64) - 0.5) * 6
    ours = quaternions_xyz(euler).numpy()
    theirs = np_quaternion(euler.numpy())
    sign = np.sign((ours * theirs).sum(1, keepdims=True))
    np.testing.assert_allclose(ours, theirs * sign, atol=1e-12)
    assert np.abs(np.abs((ours * np_quaternion(euler.numpy(), 'zyx')).sum(1)) - 1).max() > 0.1


def test_local_labels_equal_numpy_and_mutants_differ():
    rng = np.random.default_rng(4)
    thetas = rng.uniform(-np.pi / 2, np.pi / 2, 5)
    anchors = np.stack(np.meshgrid(np.linspace(-1.2, 1.2, 7), np.linspace(-1.2, 1.2, 7),
                                   indexing='xy'), -1).reshape(-1, 2)
    counts = [30, 0, 7, 1, 12]
    labels = [np.column_stack([rng.uniform(-np.pi, np.pi, n), rng.uniform(-1.4, 1.4, (n, 2))])
              for n in counts]
    offsets = [rng.normal(0, 0.01, (n, 3)) for n in counts]
    K = max(counts)
    padded = np.zeros((5, K, 3))
    padded_off = np.zeros((5, K, 3))
    valid = np.zeros((5, K), bool)
    for i, n in enumerate(counts):
        padded[i, :n], padded_off[i, :n], valid[i, :n] = labels[i], offsets[i], True
    soft, off = local_labels(torch.from_numpy(thetas), torch.from_numpy(anchors),
                             torch.from_numpy(padded), torch.from_numpy(padded_off),
                             torch.from_numpy(valid))
    expected_soft, expected_off = np_local_labels(thetas, anchors, labels, offsets)
    np.testing.assert_allclose(soft.numpy(), expected_soft, atol=1e-12)
    np.testing.assert_allclose(off.numpy(), expected_off, atol=1e-15)
    assert (soft[1] == 0).all() and (off[1] == 0).all()
    for mutant in (dict(flip=False), dict(order='zyx')):
        wrong, _ = np_local_labels(thetas, anchors, labels, offsets, **mutant)
        assert np.abs(wrong - expected_soft).max() > 1e-2, mutant


def test_positive_soft_labels_are_grasps_within_16_degrees():
    """1 - d ≥ 0.99 ⇔ the geodesic angle to the label (or its flip) is below 2·acos(0.99)
    = 16.2°: the anchor's rotation Rx Ry Rz against random labels."""
    rng = np.random.default_rng(5)
    anchor = np.array([[0.3, 0.2]])
    labels = np.column_stack([0.4 + rng.normal(0, 0.15, 400), 0.2 + rng.normal(0, 0.15, 400),
                              0.3 + rng.normal(0, 0.15, 400)])
    for label in labels:
        soft, _ = local_labels(torch.tensor([0.4], dtype=torch.float64), torch.from_numpy(anchor),
                               torch.from_numpy(label[None, None]), torch.zeros(1, 1, 3),
                               torch.ones(1, 1, dtype=torch.bool))
        q = np_quaternion(np.array([[0.4, *anchor[0]], label]))
        angle = 2 * np.degrees(np.arccos(min(1, abs(q[0] @ q[1]))))
        if abs(angle - 16.22) > 0.05:
            assert (float(soft) >= 0.99) == (angle < 16.22), angle


def test_label_assignment_equals_the_reference():
    """get_center_group_label (2 cm, 500 nearest, offsets to the centre) and
    faster_get_local_labels (49 anchors)."""
    g = golden('labels')
    frames = [0, 1, 2]
    centers = torch.from_numpy(np.concatenate([g[f'centers{b}'] for b in frames]))
    frame = torch.tensor(sum([[b] * len(g[f'centers{b}']) for b in frames], []))
    K = np.array([[927.17, 0, 651.32], [0, 927.37, 349.62], [0, 0, 1]])
    tables = []
    for b in frames:
        uv, z = g[f'labels{b}_centers_2d'], g[f'labels{b}_center_z_depths'] / 1000.0
        xyz = np.stack([z / K[0, 0] * (uv[:, 0] - K[0, 2]), z / K[1, 1] * (uv[:, 1] - K[1, 2]), z],
                       1)
        tables.append(np.column_stack([xyz, g[f'labels{b}_thetas_rad'], g[f'labels{b}_gammas_rad'],
                                       g[f'labels{b}_betas_rad']]).astype(np.float32))
    counts = [len(t) for t in tables]
    padded = np.zeros((3, max(counts), 6), np.float32)
    for b, t in enumerate(tables):
        padded[b, :len(t)] = t
    padded = torch.from_numpy(padded)
    index, valid = match_labels(centers, frame, padded[..., :3], counts)
    assert valid.sum(1).tolist() == g['group_sizes'].tolist() and g['group_sizes'].max() == 500
    matched = padded[frame[:, None].expand_as(index), index]
    offsets = (matched[..., :3].double() - centers[:, None]).float()
    rows = torch.cat([offsets, matched[..., 3:]], -1)[valid]
    np.testing.assert_allclose(rows.numpy(), g['groups'][:, :6], rtol=0, atol=2e-7)
    basic = g['anchors']
    anchors = torch.from_numpy(np.stack([np.tile(basic, 7), np.repeat(basic, 7)], 1)
                               * np.pi / 2).float()
    soft, off = local_labels(torch.from_numpy(g['thetas']), anchors, matched[..., 3:], offsets,
                             valid)
    np.testing.assert_allclose(soft.numpy(), g['multi_labels'], rtol=0, atol=1e-9)
    np.testing.assert_allclose(off.numpy(), g['offset_labels'], rtol=0, atol=1e-9)
    assert (g['multi_labels'] > 0.99).any() and (g['multi_labels'][-1] == 0).all()
    assert math.isfinite(float(soft.sum()))
