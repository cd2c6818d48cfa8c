"""RandomFlipRotateScene(apply='device'): drawn in the worker, applied by GraspDataPreprocessor,
bit-identical to augmenting in the worker (points, label poses, a GSNet training step)."""
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.transforms.augmentation import RandomFlipRotateScene
from mmgrasp.datasets.transforms.formatting import PackGraspInputs
from mmgrasp.registry import MODELS
from mmgrasp.utils.random import sample_rng

FRAMES = [(0, 0), (0, 5), (1, 2)]  # (epoch, index): one mirrored, two proper frames


def make_dataset(root: str, apply: str) -> GraspNetDataset:
    return GraspNetDataset(root, seed=3, pipeline=[
        dict(type='LoadGraspScene', num_points=800, with_graspness=True),
        dict(type='SampleGraspLabels', grids='deferred', min_points=10, min_object_points=20),
        dict(type='RandomFlipRotateScene', apply=apply),
        dict(type='PackGraspInputs')])


def batch(root: str, apply: str, frames=FRAMES) -> dict:
    dataset = make_dataset(root, apply)
    return pseudo_collate([dataset[i] for i in frames])


def test_device_mode_draws_the_same_matrix_and_applies_nothing():
    points = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    poses = np.random.default_rng(1).normal(size=(3, 3, 4)).astype(np.float32)
    out, rngs = {}, {}
    for apply in ('worker', 'device'):
        rngs[apply] = sample_rng(0, 1, 2)
        out[apply] = RandomFlipRotateScene(apply=apply)(
            dict(points=points.copy(), poses=poses.copy(), rng=rngs[apply]))
    assert out['device']['aug_matrix'].tobytes() == out['worker']['aug_matrix'].tobytes()
    assert out['device']['aug_on_device'] and not out['worker']['aug_on_device']
    assert out['device']['points'].tobytes() == points.tobytes()
    assert out['device']['poses'].tobytes() == poses.tobytes()
    assert rngs['worker'].random() == rngs['device'].random()
    with pytest.raises(ValueError, match="apply must be 'worker' or 'device'"):
        RandomFlipRotateScene(apply='gpu')


def test_pack_ships_the_matrix_only_when_pending():
    results = dict(points=np.zeros((5, 3), np.float32), aug_matrix=np.eye(3, dtype=np.float32))
    assert 'aug_matrix' not in PackGraspInputs()(dict(results, aug_on_device=False))['inputs']
    packed = PackGraspInputs()(dict(results, aug_on_device=True))['inputs']
    assert torch.equal(packed['aug_matrix'], torch.eye(3))
    with pytest.raises(ValueError, match='voxel_size'):
        PackGraspInputs()(dict(results, aug_on_device=True, voxel_size=0.01))


def test_preprocessor_applies_the_worker_arithmetic(synthetic_root):
    preprocessor = MODELS.build(dict(type='GraspDataPreprocessor'))
    pending = batch(synthetic_root, 'device')
    unaugmented = pending['inputs']['points'][0].clone()
    mirrored = {bool(torch.linalg.det(m) < 0) for m in pending['inputs']['aug_matrix']}
    assert mirrored == {True, False}  # mirrored and proper frames in one batch
    worker = preprocessor(batch(synthetic_root, 'worker'), True)['inputs']
    device = preprocessor(pending, True)['inputs']
    assert set(worker) == set(device) and 'aug_matrix' not in device
    for key in ('points', 'objectness', 'graspness'):
        assert torch.equal(worker[key], device[key]), key
    labels_w, labels_d = worker['grasp_labels'], device['grasp_labels']
    assert labels_w.num_objects == labels_d.num_objects > 0
    assert labels_w.poses.numpy().tobytes() == labels_d.poses.numpy().tobytes()
    assert torch.equal(labels_w.camera_points(), labels_d.camera_points())
    assert not torch.equal(device['points'][0], unaugmented)


def test_gsnet_training_step_identical(synthetic_root, tiny_gsnet):
    results = {}
    for apply in ('worker', 'device'):
        model = tiny_gsnet()
        data = model.data_preprocessor(batch(synthetic_root, apply, FRAMES[:2]), True)
        losses = model(**data, mode='loss')
        model.zero_grad()
        sum(losses.values()).backward()
        results[apply] = losses, {n: p.grad.clone() for n, p in model.named_parameters()}
    (loss_w, grad_w), (loss_d, grad_d) = results['worker'], results['device']
    assert loss_w.keys() == loss_d.keys()
    for key in loss_w:
        assert torch.equal(loss_w[key], loss_d[key]), key
    for name in grad_w:
        assert torch.equal(grad_w[name], grad_d[name]), name


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_cuda_batch_augmentation_matches_the_worker(synthetic_root):
    cpu = MODELS.build(dict(type='GraspDataPreprocessor'))
    cuda = MODELS.build(dict(type='GraspDataPreprocessor')).cuda()
    worker = cpu(batch(synthetic_root, 'worker'), True)['inputs']
    device = cuda(batch(synthetic_root, 'device'), True)['inputs']
    assert device['points'].is_cuda and set(worker) == set(device)
    for key in ('points', 'objectness', 'graspness'):
        assert worker[key].numpy().tobytes() == device[key].cpu().numpy().tobytes(), key
    labels_w, labels_d = worker['grasp_labels'], device['grasp_labels']
    assert labels_w.poses.numpy().tobytes() == labels_d.poses.cpu().numpy().tobytes()
    # camera_points is a matrix product: CPU and CUDA BLAS agree to rounding only
    torch.testing.assert_close(labels_w.camera_points(), labels_d.camera_points().cpu())
