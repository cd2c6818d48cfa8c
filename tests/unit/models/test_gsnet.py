"""GSNet: one training step is bit-identical between dense and deferred label grids; the
prediction is well formed; part timings are observable."""
import pytest
import torch
from mmengine.dataset import pseudo_collate

from mmgrasp.registry import MODELS

FRAMES = [(0, 0), (0, 4), (1, 2)]


def train_step(model, dataset):
    data = model.data_preprocessor(pseudo_collate([dataset[i] for i in FRAMES]), True)
    losses = model(**data, mode='loss')
    model.zero_grad()
    sum(losses.values()).backward()
    return losses, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_training_step_identical_across_storages(make_dataset, tiny_gsnet):
    results = {}
    for grids in ('dense', 'deferred'):
        results[grids] = train_step(tiny_gsnet(), make_dataset(grids, num_points=1200))
    (loss_a, grad_a), (loss_b, grad_b) = results['dense'], results['deferred']
    assert loss_a.keys() == loss_b.keys() == {'loss_objectness', 'loss_graspness', 'loss_view',
                                              'loss_score', 'loss_width'}
    for key in loss_a:
        assert torch.equal(loss_a[key], loss_b[key]), key
    assert grad_a.keys() == grad_b.keys()
    missing = [n for n, g in grad_a.items() if not g.abs().sum() > 0]
    assert len(missing) < len(grad_a) // 4, missing  # the step reaches the network
    for name in grad_a:
        assert torch.equal(grad_a[name], grad_b[name]), name


def test_training_step_reports_part_times(make_dataset, tiny_gsnet):
    model = tiny_gsnet()
    train_step(model, make_dataset('deferred', num_points=1200))
    assert set(model.timer.pop()) == {'backbone', 'seed_selection', 'view', 'assigner',
                                      'grouper', 'head', 'losses'}


def test_predict_writes_well_formed_grasps(make_dataset, tiny_gsnet):
    model = tiny_gsnet().eval()
    data = model.data_preprocessor(pseudo_collate([make_dataset('deferred')[0]]), False)
    with torch.no_grad():
        (sample,) = model(**data, mode='predict')
    grasps = sample.pred_grasps
    assert grasps.shape == (64, 17) and torch.isfinite(grasps).all()
    rotations = grasps[:, 4:13].reshape(-1, 3, 3)
    eye = torch.eye(3).expand_as(rotations)
    assert torch.allclose(rotations @ rotations.transpose(1, 2), eye, atol=1e-5)
    assert torch.allclose(torch.linalg.det(rotations), torch.ones(64), atol=1e-5)
    assert ((grasps[:, 1] >= 0) & (grasps[:, 1] <= 0.1)).all()
    assert (grasps[:, 16] == -1).all()


def test_label_grid_mismatch_is_named(make_dataset):
    model = MODELS.build(dict(type='GSNet', num_seeds=16, num_views=5,
                              backbone=dict(type='SparseUNet14', channels=(8,) * 8,
                                            out_channels=16),
                              crop=dict(channels=(16,)),
                              assigner=dict(type='NearestLabelAssigner', num_views=5)))
    data = model.data_preprocessor(pseudo_collate([make_dataset('deferred')[0]]), True)
    with pytest.raises(ValueError, match='set num_angles/num_depths'):
        model(**data, mode='loss')
