"""Test-time draws are keyed by (seed, scene, camera, frame): a frame's sampled cloud is the same
whatever else is in the run (a frame stride, a frame list, a launcher's shard); training draws
stay keyed by (seed, epoch, sample index)."""
import numpy as np
import pytest
from mmengine.config import Config

from mmgrasp.datasets.transforms import LoadGraspScene
from mmgrasp.registry import DATASETS, build_in_scope
from mmgrasp.utils.random import frame_rng, image_rng, sample_rng


def _points_by_frame(dataset, indices=None) -> dict:
    out = {}
    for idx in (range(len(dataset)) if indices is None else indices):
        sample = dataset[idx]
        info = sample['data_samples'].metainfo
        out[(info['scene'], info['frame'])] = sample['inputs']['points'].numpy()
    return out


@pytest.fixture(scope='module')
def test_dataset_cfg(small_gsnet_files):
    cfg = Config.fromfile(small_gsnet_files[0]).test_dataloader.dataset
    assert cfg.test_mode  # the shipped test configs draw per frame
    return cfg


def _build(cfg, **changes):
    return build_in_scope(DATASETS, dict(cfg, **changes))


def test_a_frame_draws_the_same_whatever_else_runs(test_dataset_cfg):
    full = _points_by_frame(_build(test_dataset_cfg))
    assert len(full) == 6
    for changes in (dict(frame_stride=2), dict(frames=[1, 2]), dict(frames=[2]),
                    dict(scenes=[1])):
        part = _points_by_frame(_build(test_dataset_cfg, **changes))
        assert part and set(part) < set(full), changes
        for key, points in part.items():
            np.testing.assert_array_equal(points, full[key], err_msg=f'{changes} {key}')


def test_launcher_shards_draw_as_the_whole_run(test_dataset_cfg, monkeypatch):
    import mmengine.dataset.sampler as sampler_module

    from mmgrasp.datasets.samplers import EpochAwareSampler
    dataset = _build(test_dataset_cfg, frames=[0, 2])
    full = _points_by_frame(_build(test_dataset_cfg))
    seen = set()
    for rank in range(3):  # 4 samples over 3 ranks: uneven shards, padded by round_up
        monkeypatch.setattr(sampler_module, 'get_dist_info', lambda r=rank: (r, 3))
        shard = list(EpochAwareSampler(dataset, shuffle=False))
        part = _points_by_frame(dataset, shard)
        for key, points in part.items():
            np.testing.assert_array_equal(points, full[key], err_msg=f'rank {rank} {key}')
        seen |= set(part)
    assert seen == {(s, f) for s in (0, 1) for f in (0, 2)}


def test_the_test_stream_is_the_frames(synthetic_root):
    """Independent of the dataset: LoadGraspScene fed frame_rng(seed, scene, camera, frame)
    gives the test dataset's cloud; a neighbouring key gives another."""
    from mmgrasp.datasets import GraspNetDataset
    from mmgrasp.datasets.graspnet_reader import GraspNetReader
    pipeline = [dict(type='LoadGraspScene', num_points=500), dict(type='PackGraspInputs')]
    dataset = GraspNetDataset(synthetic_root, pipeline=pipeline, seed=5, test_mode=True,
                              frames=[1])
    reader = GraspNetReader(synthetic_root)
    load = LoadGraspScene(num_points=500)
    for index, (scene, frame) in enumerate([(0, 1), (1, 1)]):
        expected = load(dict(reader=reader, scene=scene, frame=frame,
                             rng=frame_rng(5, scene, 'realsense', frame)))['points']
        np.testing.assert_array_equal(dataset[index]['inputs']['points'].numpy(), expected)
    other = load(dict(reader=reader, scene=0, frame=1, rng=frame_rng(5, 0, 'kinect', 1)))
    assert not np.array_equal(other['points'], dataset[0]['inputs']['points'].numpy())


def test_training_draws_stay_keyed_by_epoch_and_sample_index(synthetic_root):
    from mmgrasp.datasets import GraspNetDataset
    from mmgrasp.datasets.graspnet_reader import GraspNetReader
    pipeline = [dict(type='LoadGraspScene', num_points=500), dict(type='PackGraspInputs')]
    dataset = GraspNetDataset(synthetic_root, pipeline=pipeline, seed=5, frame_stride=2)
    info = dataset.get_data_info(1)
    expected = LoadGraspScene(num_points=500)(dict(
        reader=GraspNetReader(synthetic_root), scene=info['scene'], frame=info['frame'],
        rng=sample_rng(5, 3, 1)))['points']
    np.testing.assert_array_equal(dataset[(3, 1)]['inputs']['points'].numpy(), expected)


def test_stream_keys_are_validated_and_distinct():
    draw = lambda rng: rng.integers(0, 2**62, 4).tolist()  # noqa: E731
    assert draw(frame_rng(0, 1, 'realsense', 2)) == draw(frame_rng(0, 1, 'realsense', 2))
    keys = [(0, 1, 'realsense', 2), (1, 1, 'realsense', 2), (0, 2, 'realsense', 2),
            (0, 1, 'kinect', 2), (0, 1, 'realsense', 3)]
    assert len({tuple(draw(frame_rng(*k))) for k in keys}) == len(keys)
    assert draw(frame_rng(0, 0, 'realsense', 0)) != draw(sample_rng(0, 0, 0))
    depth = np.arange(12, dtype=np.uint16).reshape(3, 4)
    assert draw(image_rng(0, depth)) == draw(image_rng(0, depth.copy()))
    assert draw(image_rng(0, depth)) != draw(image_rng(0, depth.reshape(4, 3)))
    assert draw(image_rng(0, depth)) != draw(image_rng(0, depth + 1))
    with pytest.raises(ValueError, match='non-negative'):
        frame_rng(0, -1, 'realsense', 0)
