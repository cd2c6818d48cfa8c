"""benchmark_loader.py --reference: an original dataset class gets the benchmark's frames in the
benchmark's order and the labels its training script loads; the MinkowskiEngine stand-in
quantises as its collate expects. A checkout written here stands in for graspnet-baseline's
(the real ones are not part of the repository): its dataset reports what it was given."""
import os
import sys

import numpy as np
import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, 'tools', 'analysis'))
import reference_loaders  # noqa: E402

FAKE_DATASET = '''
from torch.utils.data import Dataset
from data_utils import remove_invisible_grasp_points


class GraspNetDataset(Dataset):
    def __getitem__(self, index):
        return dict(depth=self.depthpath[index], meta=self.metapath[index],
                    scene=self.scenename[index], frame=self.frameid[index],
                    objects=sorted(self.grasp_labels), valid=self.valid_obj_idxs,
                    collisions=sorted(self.collision_labels), points=self.num_points,
                    augment=self.augment, outlier=self.remove_outlier)


def load_grasp_labels(root):
    pass


def collate_fn(batch):
    return batch
'''


@pytest.fixture(autouse=True)
def _restore_imports(monkeypatch):
    """The loaders put checkouts on sys.path and stand-ins in sys.modules: undone after."""
    monkeypatch.setattr(sys, 'path', list(sys.path))
    monkeypatch.setattr(reference_loaders, '_imported', {})
    before = dict(sys.modules)
    yield
    for name in set(sys.modules) - set(before):
        del sys.modules[name]
    sys.modules.update(before)


@pytest.fixture
def baseline_checkout(tmp_path) -> str:
    for folder, name, text in (('dataset', 'graspnet_dataset.py', FAKE_DATASET),
                               ('utils', 'data_utils.py',
                                'def remove_invisible_grasp_points():\n    pass\n')):
        os.makedirs(tmp_path / 'baseline' / folder, exist_ok=True)
        (tmp_path / 'baseline' / folder / name).write_text(text)
    return str(tmp_path / 'baseline')


def test_the_original_class_gets_the_benchmark_frames_and_labels(baseline_checkout,
                                                                 synthetic_root, tmp_path):
    assert reference_loaders.reference_kind(baseline_checkout) == 'graspnet-baseline'
    frames = [(1, 2), (0, 0), (1, 0)]
    dataset, collate = reference_loaders.reference_dataset(
        baseline_checkout, 'graspnet-baseline', synthetic_root, 'realsense', frames, 1234, 0.005,
        str(tmp_path))
    for i, (scene, frame) in enumerate(frames):
        sample = collate([dataset[i]])[0]
        folder = os.path.join(synthetic_root, 'scenes', f'scene_{scene:04d}', 'realsense')
        assert sample['depth'] == os.path.join(folder, 'depth', f'{frame:04d}.png')
        assert sample['meta'] == os.path.join(folder, 'meta', f'{frame:04d}.mat')
        assert (sample['scene'], sample['frame']) == (f'scene_{scene:04d}', frame)
    assert sample['points'] == 1234 and sample['augment'] and sample['outlier']
    assert sample['collisions'] == ['scene_0000', 'scene_0001']
    objects = sorted(int(n[:3]) for n in os.listdir(os.path.join(synthetic_root, 'grasp_label')))
    assert sample['objects'] == sample['valid'] == [o + 1 for o in objects if o != 18]
    points, offsets, scores, tolerance = dataset.grasp_labels[objects[0] + 1]
    with np.load(os.path.join(synthetic_root, 'grasp_label', f'{objects[0]:03d}_labels.npz')) as z:
        np.testing.assert_array_equal(offsets, z['offsets'])
        assert scores.dtype == np.float32 and len(points) == len(z['points'])
    assert tolerance.shape == scores.shape


def test_minkowski_stand_in_quantises_like_its_collate_expects():
    rng = np.random.default_rng(0)
    clouds = [rng.uniform(-2, 2, (50, 3)).astype(np.float32) for _ in range(2)]
    coords, feats = reference_loaders._sparse_collate(
        clouds, [np.ones_like(c) for c in clouds])
    expected = np.concatenate([np.concatenate([np.full((50, 1), b), np.floor(c)], 1)
                               for b, c in enumerate(clouds)]).astype(np.int32)
    np.testing.assert_array_equal(coords.numpy(), expected)
    unique, _, first, inverse = reference_loaders._sparse_quantize(
        coords, feats, return_index=True, return_inverse=True)
    assert len(np.unique(expected, axis=0)) == len(unique) < len(expected)
    assert torch.equal(unique[inverse], coords)  # every point finds its voxel
    assert torch.equal(coords[first], unique)
    assert all(first[v] == (inverse == v).nonzero()[0, 0] for v in range(len(unique)))


def test_an_unknown_checkout_is_refused(tmp_path):
    with pytest.raises(SystemExit, match='no dataset/graspnet_dataset.py'):
        reference_loaders.reference_kind(str(tmp_path))
