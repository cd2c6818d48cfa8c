"""The HGGD detector on synthetic batches in its input contract (tests/unit/models/
_hggd_inputs.py): losses, gradients, degenerate batches, predictions, draws, options."""
import math
import sys
import os

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _hggd_inputs import make_batch, small_hggd  # noqa: E402

LOSSES = ('loss_loc', 'loss_reg', 'loss_cls', 'loss_multi_cls', 'loss_offset')


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    """Tiny convolutions on a loaded 2-core machine run far faster on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def batch():
    return make_batch(seed=0)


def trained_losses(model, inputs, samples):
    model.train()
    losses = model.loss(inputs, samples)
    assert sorted(losses) == sorted(LOSSES)
    assert all(math.isfinite(float(v.detach())) for v in losses.values()), losses
    return losses


def test_loss_trains_both_networks_and_detaches_the_features(batch):
    torch.manual_seed(0)
    model = small_hggd()
    inputs, samples = batch
    losses = trained_losses(model, inputs, samples)
    assert float(losses['loss_multi_cls'].detach()) > 0 and float(losses['loss_loc'].detach()) > 0
    (losses['loss_multi_cls'] + losses['loss_offset']).backward()
    assert all(p.grad is None for p in model.anchor_net.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.local_net.parameters())
    model.zero_grad()
    sum(losses[k] for k in ('loss_loc', 'loss_reg', 'loss_cls')).backward()
    assert all(p.grad is not None for p in model.anchor_net.parameters())


@pytest.mark.parametrize('case', ['no_grasps', 'zero_depth', 'one_object', 'no_region',
                                  'no_labels_anywhere'])
def test_degenerate_batches_are_finite(case):
    torch.manual_seed(0)
    kwargs = dict(no_grasps=dict(no_grasps=1), zero_depth=dict(zero_depth=0),
                  one_object={}, no_region={}, no_labels_anywhere=dict(grasps=0)).get(case)
    inputs, samples = make_batch(seed=3, **kwargs)
    if case == 'one_object':
        inputs, samples = make_batch(seed=3, batch=1)
    model = small_hggd(min_points=10 ** 6) if case == 'no_region' else small_hggd()
    losses = trained_losses(model, inputs, samples)
    sum(losses.values()).backward()
    if case == 'no_region':
        assert (float(losses['loss_multi_cls'].detach()) == 0
                and float(losses['loss_offset'].detach()) == 0)
    model.eval()
    with torch.no_grad():
        results = model.predict(inputs, samples)
    assert len(results) == len(samples)
    for r in results:
        assert r.pred_grasps.shape[1] == 17 and torch.isfinite(r.pred_grasps).all()


def test_predictions_are_graspnet_rows_best_first(batch):
    torch.manual_seed(0)
    model = small_hggd(test_cfg=dict(collision=False)).eval()
    inputs, samples = batch
    with torch.no_grad():
        results = model.predict(inputs, samples)
    assert sum(len(r.pred_grasps) for r in results) > 0
    for r in results:
        rows = r.pred_grasps.numpy()
        assert rows.dtype == np.float32 and (np.diff(rows[:, 0]) <= 0).all()
        assert ((rows[:, 0] > 0) & (rows[:, 0] < 1)).all() and (rows[:, 16] == -1).all()
        assert (rows[:, 1] > 0).all() and (rows[:, 3] == np.float32(0.02)).all()
        rotation = rows[:, 4:13].reshape(-1, 3, 3)
        assert (np.abs(rotation[:, 2, 1]) < math.sin(math.radians(60)) + 1e-6).all()
        assert r.scene == samples[0].scene or r.scene == samples[1].scene
    filtered = small_hggd().eval()
    filtered.load_state_dict(model.state_dict())
    with torch.no_grad():
        kept = filtered.predict(inputs, samples)
    assert sum(len(r.pred_grasps) for r in kept) < sum(len(r.pred_grasps) for r in results)


def test_a_frames_prediction_does_not_depend_on_its_batch(batch):
    torch.manual_seed(0)
    model = small_hggd().eval()
    inputs, samples = batch
    one = {k: (v[:1] if torch.is_tensor(v) else v) for k, v in inputs.items()}
    with torch.no_grad():
        together = model.predict(inputs, samples)[0].pred_grasps
        alone = model.predict(one, samples[:1])[0].pred_grasps
        again = model.predict(one, samples[:1])[0].pred_grasps
    assert len(alone) and torch.equal(alone, again)
    torch.testing.assert_close(together, alone)
    other = [s.clone() for s in samples[:1]]
    other[0].set_metainfo(dict(frame=7))  # another frame id: other draws
    with torch.no_grad():
        moved = model.predict(one, other)[0].pred_grasps
    assert not torch.equal(moved, alone)


def test_training_draws_follow_the_epoch(batch):
    inputs, samples = batch
    torch.manual_seed(0)
    model = small_hggd()
    first = trained_losses(model, inputs, samples)
    torch.manual_seed(123)  # dropout too draws from the samples' streams, not the global one
    again = trained_losses(model, inputs, samples)
    later = [s.clone() for s in samples]
    for s in later:
        s.set_metainfo(dict(epoch=1))
    moved = trained_losses(model, inputs, later)
    first, again, moved = ({k: float(v.detach()) for k, v in losses.items()}
                           for losses in (first, again, moved))
    assert first['loss_multi_cls'] == again['loss_multi_cls']
    assert moved['loss_multi_cls'] != first['loss_multi_cls']
    assert moved['loss_loc'] == first['loss_loc']


def test_anchors_are_saved_and_shift_in_the_loss(batch):
    torch.manual_seed(0)
    model = small_hggd()
    state = model.state_dict()
    assert state['anchors.gamma'].dtype == torch.float64 and 'anchors.counts' not in state
    model.anchors.threshold = 2  # a few labels match on these small frames
    model.anchors.shift_enabled = True
    before = model.anchors.gamma.clone()
    trained_losses(model, *batch)
    assert not torch.equal(model.anchors.gamma, before)
    fresh = small_hggd()
    fresh.load_state_dict(model.state_dict(), strict=True)
    assert torch.equal(fresh.anchors.gamma, model.anchors.gamma)


@pytest.mark.parametrize('option,value', [
    ('test_centers', 2), ('heat_threshold', 0.9), ('top_k', 2), ('max_gamma', 20.0),
    ('jitter', 0.01), ('knn', 1), ('sigma', 1.0), ('anchor_width', 8.0), ('seed', 5),
    ('group_points', 16), ('anchor_depth', 60.0), ('min_points', 31)])
def test_every_option_changes_the_predictions(batch, option, value):
    inputs, samples = batch
    torch.manual_seed(0)
    base = small_hggd(test_cfg=dict(collision=False)).eval()
    changed = small_hggd(test_cfg=dict(collision=False), **{option: value}).eval()
    changed.load_state_dict(base.state_dict())
    with torch.no_grad():
        a = [r.pred_grasps for r in base.predict(inputs, samples)]
        b = [r.pred_grasps for r in changed.predict(inputs, samples)]
    assert any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(a, b)), option


def test_center_order_reference_is_consumed(batch):
    """center_order='reference' changes the predictions of frames with zero-depth centres
    (every other depth row blanked: centres on both kinds); an unknown order is refused."""
    inputs, samples = batch
    inputs = dict(inputs, depths=inputs['depths'].clone())
    inputs['depths'][:, ::4] = 0  # depth pixel 2u: zero for even u, read for odd u
    torch.manual_seed(0)
    base = small_hggd(test_cfg=dict(collision=False)).eval()
    reference = small_hggd(test_cfg=dict(collision=False), center_order='reference').eval()
    reference.load_state_dict(base.state_dict())
    with torch.no_grad():
        a = [r.pred_grasps for r in base.predict(inputs, samples)]
        b = [r.pred_grasps for r in reference.predict(inputs, samples)]
    assert any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="center_order must be 'grasp' or 'reference'"):
        small_hggd(center_order='sorted')


def test_train_centers_and_the_inputs_it_needs(batch):
    inputs, samples = batch
    torch.manual_seed(0)
    few = small_hggd(train_centers=1)
    many = small_hggd(train_centers=16)
    many.load_state_dict(few.state_dict())
    assert float(trained_losses(few, inputs, samples)['loss_multi_cls'].detach()) != float(
        trained_losses(many, inputs, samples)['loss_multi_cls'].detach())
    with pytest.raises(KeyError, match="inputs\\['grasps'\\]"):
        few.loss({k: v for k, v in inputs.items() if k != 'grasps'}, samples)
    with pytest.raises(ValueError, match='unknown test_cfg'):
        small_hggd(test_cfg=dict(collision_thresh=0.1))


def close_pairs(rows: np.ndarray, translation: float, rotation_deg: float) -> int:
    """Pairs of rows nearer than both thresholds (the NMS rule, redone in numpy)."""
    t, r = rows[:, 13:16].astype(np.float64), rows[:, 4:13].reshape(-1, 3, 3).astype(np.float64)
    dist = np.linalg.norm(t[:, None] - t[None], axis=-1)
    trace = np.einsum('aij,bij->ab', r, r)
    angle = np.degrees(np.arccos(np.clip((trace - 1) / 2, -1, 1)))
    close = (dist < translation) & (angle < rotation_deg)
    return int(np.triu(close, 1).sum())


def test_test_time_nms_keeps_no_close_pair_and_its_options_apply(batch):
    inputs, samples = batch
    torch.manual_seed(0)
    base = small_hggd(test_cfg=dict(collision=False, nms=False)).eval()
    found = {}
    for name, cfg in [('off', dict(nms=False)), ('on', {}), ('far', dict(nms_translation=0.1)),
                      ('wide', dict(nms_rotation=90.0))]:
        model = small_hggd(test_cfg=dict(collision=False, **cfg)).eval()
        model.load_state_dict(base.state_dict())
        with torch.no_grad():
            found[name] = [r.pred_grasps.numpy() for r in model.predict(inputs, samples)]
    for raw, kept in zip(found['off'], found['on']):
        assert close_pairs(raw, 0.03, 30.0) > 0 and close_pairs(kept, 0.03 - 1e-6, 30.0) == 0
        assert (np.diff(kept[:, 0]) <= 0).all()
        assert {r.tobytes() for r in kept} <= {r.tobytes() for r in raw}  # a subset of rows
    count = {k: sum(len(rows) for rows in v) for k, v in found.items()}
    assert count['off'] > count['on'] > count['far'] and count['on'] > count['wide'], count


def test_predicted_rotations_are_the_nearest_rotations(batch):
    """The decode's R0 columns are orthogonal only to ~1e-4 (as the reference's); the rows the
    model returns carry the nearest rotation (the evaluator refuses more than 1e-5 off)."""
    from mmgrasp.models.detectors.hggd import nearest_rotations
    inputs, samples = batch
    torch.manual_seed(0)
    model = small_hggd(test_cfg=dict(collision=False, nms=False)).eval()
    with torch.no_grad():
        rows = np.concatenate([r.pred_grasps.numpy() for r in model.predict(inputs, samples)])
    r = rows[:, 4:13].reshape(-1, 3, 3).astype(np.float64)
    np.testing.assert_allclose(r @ r.transpose(0, 2, 1), np.broadcast_to(np.eye(3), r.shape),
                               atol=2e-6)
    np.testing.assert_allclose(np.linalg.det(r), 1, atol=2e-6)
    # against its definition: the closest rotation in Frobenius norm, checked on skewed input
    rng = np.random.default_rng(0)
    skewed = np.zeros((50, 17))
    q = np.linalg.qr(rng.normal(size=(50, 3, 3)))[0]
    q[np.linalg.det(q) < 0, :, 0] *= -1
    skewed[:, 4:13] = (q + rng.normal(scale=1e-3, size=q.shape)).reshape(-1, 9)
    fixed = nearest_rotations(skewed)[:, 4:13].reshape(-1, 3, 3)
    np.testing.assert_allclose(fixed, q, atol=5e-3)
    for trial in rng.normal(size=(20, 3, 3)) * 1e-3:  # no rotation nearby is closer
        other = np.linalg.qr(fixed[0] + trial)[0]
        other *= np.sign(np.diag(np.linalg.qr(fixed[0] + trial)[1]))[None]
        if np.linalg.det(other) > 0:
            assert np.linalg.norm(other - skewed[0, 4:13].reshape(3, 3)) >= np.linalg.norm(
                fixed[0] - skewed[0, 4:13].reshape(3, 3)) - 1e-12


def test_label_table_back_projects_each_frame_with_its_own_camera():
    """The label rows of all frames at once equal numpy's back-projection frame by frame, bit
    for bit: a frame without records, a frame with other intrinsics, zero padding."""
    from mmgrasp.models.detectors.hggd import label_table
    inputs, _ = make_batch(seed=5, batch=3, no_grasps=1)
    intrinsics = inputs['intrinsics'].clone()
    intrinsics[2, 0, 0] *= 1.5
    intrinsics[2, 1, 2] += 7.0
    table, counts = label_table(inputs['grasps'], intrinsics)
    assert counts == [300, 0, 300] and table.shape == (3, 300, 6)
    for b, g in enumerate(inputs['grasps']):
        uv, z = g['centers_2d'].numpy(), g['center_z_depths'].numpy() / 1000.0
        k = intrinsics[b].numpy()
        expected = np.stack([z / k[0, 0] * (uv[:, 0] - k[0, 2]), z / k[1, 1] * (uv[:, 1] - k[1, 2]),
                             z, g['thetas_rad'].numpy().astype(np.float64),
                             g['gammas_rad'].numpy(), g['betas_rad'].numpy()], 1)
        np.testing.assert_array_equal(table[b, :counts[b]].numpy(), expected.astype(np.float32))
        assert (table[b, counts[b]:] == 0).all()
    with pytest.raises(KeyError, match='thetas_rad'):
        label_table([{k: v for k, v in inputs['grasps'][0].items() if k != 'thetas_rad'}],
                    intrinsics[:1])
