"""FineGrasp's normals and augmentation in the data preprocessor (EstimateNormals and
RandomFlipRotateScene with apply='device'): the batch (points, normals, per-point targets,
economic label poses) and a FineGrasp training step bit for bit those of the worker path."""
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.transforms.augmentation import apply_matrix
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.ops.point_normals import estimate_normals
from test_finegrasp import SMALL, V, shipped_model

FRAMES = [(0, 0), (0, 3), (1, 2)]  # (epoch, index): mirrored, proper, mirrored
KEYS = ('points', 'normals', 'objectness', 'graspness')


def batch(root: str, normals: str, augment: str, flip_normals: bool = False,
          frames=FRAMES, orientation: str = 'camera') -> dict:
    dataset = GraspNetDataset(root, seed=3, pipeline=[
        dict(type='LoadGraspScene', num_points=1000, with_graspness=True),
        dict(type='EstimateNormals', orientation=orientation, apply=normals),
        dict(type='LoadEconomicLabels', grids='deferred', top_k=V),
        dict(type='RandomFlipRotateScene', max_rotation=np.pi / 6, apply=augment,
             flip_normals=flip_normals),
        dict(type='PackGraspInputs', keys=KEYS)])
    return pseudo_collate([dataset[i] for i in frames])


@pytest.mark.parametrize('flip_normals', [False, True])
def test_the_device_paths_give_the_worker_batch(synthetic_root, flip_normals):
    preprocessor = GraspDataPreprocessor()
    worker = preprocessor(batch(synthetic_root, 'worker', 'worker', flip_normals), True)
    pending = batch(synthetic_root, 'device', 'device', flip_normals)
    assert 'normals' not in pending['inputs']
    mirrored = {bool(torch.linalg.det(m) < 0) for m in pending['inputs']['aug_matrix']}
    assert mirrored == {True, False}
    device = preprocessor(pending, True)
    # normals from the worker, augmentation on the device: the same batch too
    mixed = preprocessor(batch(synthetic_root, 'worker', 'device', flip_normals), True)
    for other in (device, mixed):
        assert set(other['inputs']) == set(worker['inputs'])
        for key in KEYS:
            assert other['inputs'][key].numpy().tobytes() == \
                worker['inputs'][key].numpy().tobytes(), key
        for a, b in zip(other['data_samples'], worker['data_samples']):
            assert a.economic_labels.poses.numpy().tobytes() == \
                b.economic_labels.poses.numpy().tobytes()
    # the normals are the camera-frame cloud's, turned
    for b in range(len(FRAMES)):
        own = estimate_normals(pending['inputs']['points'][b].numpy())
        turn = pending['inputs']['normal_matrix'][b].numpy()
        assert device['inputs']['normals'][b].numpy().tobytes() == \
            apply_matrix(turn, own).tobytes()
        assert not np.array_equal(turn, np.eye(3, dtype=np.float32))


def test_the_worker_augmentation_of_pending_normals_is_refused(synthetic_root):
    with pytest.raises(ValueError, match="estimate the normals of the augmented cloud"):
        batch(synthetic_root, 'device', 'worker', frames=FRAMES[:1])


def test_a_batch_asks_for_one_rule(synthetic_root):
    preprocessor = GraspDataPreprocessor()
    camera = batch(synthetic_root, 'device', 'device', frames=FRAMES[:1])
    solver = batch(synthetic_root, 'device', 'device', frames=FRAMES[1:2], orientation='solver')
    mixed = dict(inputs={k: camera['inputs'][k] + solver['inputs'][k] for k in camera['inputs']},
                 data_samples=camera['data_samples'] + solver['data_samples'])
    with pytest.raises(ValueError, match='different normal rules'):
        preprocessor(mixed, True)
    both = dict(camera, inputs=dict(camera['inputs'], normals=[torch.zeros(1000, 3)]))
    with pytest.raises(ValueError, match="'normals' and a normal_rule"):
        preprocessor(both, True)
    # the rule's orientation reaches the normals
    got = preprocessor(solver, True)['inputs']['normals']
    assert not torch.equal(got, preprocessor(batch(synthetic_root, 'device', 'device',
                                                   frames=FRAMES[1:2]), True)['inputs']['normals'])


def test_a_finegrasp_training_step_is_the_workers(synthetic_root):
    results = {}
    for path in ('worker', 'device'):
        torch.manual_seed(9)
        model = shipped_model(**{**SMALL, 'num_views': V}, assigner=dict(num_views=V)).train()
        data = model.data_preprocessor(batch(synthetic_root, path, path, frames=FRAMES[:1]), True)
        losses = model.loss(data['inputs'], data['data_samples'])
        model.zero_grad()
        sum(losses.values()).backward()
        results[path] = losses, {n: p.grad.clone() for n, p in model.named_parameters()
                                 if p.grad is not None}
    (loss_w, grad_w), (loss_d, grad_d) = results['worker'], results['device']
    assert all(torch.isfinite(v).all() for v in loss_w.values())
    assert loss_w.keys() == loss_d.keys() and grad_w.keys() == grad_d.keys()
    for key in loss_w:
        assert torch.equal(loss_w[key], loss_d[key]), key
    for name in grad_w:
        assert torch.equal(grad_w[name], grad_d[name]), name
