"""GraspNetDataset and EpochAwareSampler: (seed, epoch, index) fixes a sample, whatever loads it."""
import pickle

import mmengine.dataset.sampler as mmengine_sampler
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from torch.utils.data import DataLoader

import mmgrasp.datasets.transforms.augmentation  # noqa: F401  (registers the transforms)
import mmgrasp.datasets.transforms.formatting  # noqa: F401
import mmgrasp.datasets.transforms.loading  # noqa: F401
from mmgrasp.datasets.graspnet_dataset import GraspNetDataset
from mmgrasp.datasets.samplers import EpochAwareSampler
from mmgrasp.registry import DATA_SAMPLERS, DATASETS

PIPELINE = [dict(type='LoadGraspScene', num_points=1000),
            dict(type='RandomFlipRotateScene'),
            dict(type='PackGraspInputs')]


class Record:
    """A pipeline step that keeps what it was given."""

    def __call__(self, results):
        self.results = dict(results)
        return results


def assert_same_sample(a, b):
    assert a['data_samples'].metainfo == b['data_samples'].metainfo
    assert a['inputs'].keys() == b['inputs'].keys()
    for key in a['inputs']:
        assert torch.equal(a['inputs'][key], b['inputs'][key]), key


def test_registered():
    assert DATASETS.get('GraspNetDataset') is GraspNetDataset
    assert DATA_SAMPLERS.get('EpochAwareSampler') is EpochAwareSampler


def test_data_list_and_selection(synthetic_root):
    dataset = GraspNetDataset(synthetic_root)
    assert len(dataset) == 6
    assert dataset.get_data_info(4) == dict(scene=1, frame=1, camera='realsense', sample_idx=4)
    assert dataset.metainfo['dataset_name'] == 'GraspNet-1Billion'
    assert dataset.metainfo['camera'] == 'realsense'
    assert len(GraspNetDataset(synthetic_root, scenes=1, frames=2)) == 2
    assert [dataset.get_data_info(i)['scene']
            for i in range(len(dataset))] == [0, 0, 0, 1, 1, 1]
    only = GraspNetDataset(synthetic_root, scenes=[1], frames=5)
    assert [(d['scene'], d['frame']) for d in (only.get_data_info(i) for i in range(3))] == \
        [(1, 0), (1, 1), (1, 2)]
    with pytest.raises(ValueError, match=r'scenes \[5\]'):
        GraspNetDataset(synthetic_root, scenes=[0, 5])
    with pytest.raises(ValueError, match='scenes=3'):
        GraspNetDataset(synthetic_root, scenes=3)
    with pytest.raises(ValueError, match='refetch'):
        GraspNetDataset(synthetic_root, max_refetch=10)


def test_getitem_int_and_epoch_index(synthetic_root):
    record = Record()
    dataset = GraspNetDataset(synthetic_root, seed=5, pipeline=[record])
    dataset[(2, 4)]
    results = record.results
    assert (results['scene'], results['frame'], results['sample_idx'], results['epoch']) == \
        (1, 1, 4, 2)
    assert results['reader'] is dataset.reader and results['data_root'] == synthetic_root
    assert results['rng'].random() == np.random.default_rng([5, 2, 4]).random()
    dataset[-1]
    assert (record.results['sample_idx'], record.results['epoch']) == (5, 0)
    assert record.results['rng'].random() == np.random.default_rng([5, 0, 5]).random()
    with pytest.raises(IndexError):
        dataset[(0, 6)]

    full = GraspNetDataset(synthetic_root, pipeline=PIPELINE)
    assert_same_sample(full[3], full[(0, 3)])
    assert not torch.equal(full[(0, 3)]['inputs']['points'], full[(1, 3)]['inputs']['points'])
    assert_same_sample(full[(1, 3)], pickle.loads(pickle.dumps(full))[(1, 3)])


def test_failures_name_the_frame(synthetic_root):
    dataset = GraspNetDataset(synthetic_root, pipeline=[lambda results: None])
    with pytest.raises(RuntimeError, match=r'returned None on scene 1 frame 0'):
        dataset[3]

    def broken(results):
        raise KeyError('missing')

    dataset = GraspNetDataset(synthetic_root, pipeline=[broken])
    with pytest.raises(KeyError, match=r'broken.*scene 0 frame 2.*epoch 7'):
        dataset[(7, 2)]


def test_sampler_shuffles_by_seed_and_epoch(synthetic_root):
    dataset = GraspNetDataset(synthetic_root)
    sampler = EpochAwareSampler(dataset, seed=11)
    order = list(sampler)
    expected = torch.randperm(6, generator=torch.Generator().manual_seed(11)).tolist()
    assert order == [(0, i) for i in expected]
    assert list(sampler) == order
    sampler.set_epoch(3)
    expected = torch.randperm(6, generator=torch.Generator().manual_seed(14)).tolist()
    assert list(sampler) == [(3, i) for i in expected]
    assert list(EpochAwareSampler(dataset, shuffle=False, seed=0)) == [(0, i) for i in range(6)]


def test_sampler_sharding_covers_single_process(synthetic_root, monkeypatch):
    dataset = GraspNetDataset(synthetic_root, scenes=[0], frames=3)  # 3 samples: odd for 2 ranks
    single = list(EpochAwareSampler(dataset, seed=2))
    shards = []
    for rank in (0, 1):
        monkeypatch.setattr(mmengine_sampler, 'get_dist_info', lambda rank=rank: (rank, 2))
        sampler = EpochAwareSampler(dataset, seed=2)
        assert len(sampler) == 2
        shards.append(list(sampler))
    assert set(shards[0]) | set(shards[1]) == set(single)
    # interleaving the shards gives the single-process order, padded by round_up
    assert [s for pair in zip(*shards) for s in pair][:3] == single


def test_sampler_skip(synthetic_root):
    sampler = EpochAwareSampler(GraspNetDataset(synthetic_root), seed=1)
    sampler.set_epoch(2)
    full = list(sampler)
    sampler.set_start(4)
    assert len(sampler) == 2
    assert list(sampler) == full[4:]
    assert len(sampler) == 6 and list(sampler) == full  # consumed by one iteration
    with pytest.raises(ValueError):
        sampler.set_start(7)


def load_all(dataset, workers, persistent=False, epochs=(0, 1)):
    sampler = EpochAwareSampler(dataset, seed=3)
    loader = DataLoader(dataset, batch_size=2, sampler=sampler, num_workers=workers,
                        collate_fn=pseudo_collate, persistent_workers=persistent)
    batches = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        batches.extend(loader)
    return batches


def test_workers_do_not_change_samples(synthetic_root):
    dataset = GraspNetDataset(synthetic_root, pipeline=PIPELINE)
    serial = load_all(dataset, 0)
    assert len(serial) == 6
    for parallel in (load_all(dataset, 2), load_all(dataset, 2, persistent=True)):
        assert len(parallel) == len(serial)
        for a, b in zip(serial, parallel):
            assert [s.metainfo for s in a['data_samples']] == \
                [s.metainfo for s in b['data_samples']]
            for key in a['inputs']:
                assert all(torch.equal(x, y) for x, y in zip(a['inputs'][key], b['inputs'][key]))
    # the same frame differs between epochs
    first = {s.sample_idx: p for b in serial[:3]
             for s, p in zip(b['data_samples'], b['inputs']['points'])}
    second = {s.sample_idx: p for b in serial[3:]
              for s, p in zip(b['data_samples'], b['inputs']['points'])}
    assert not any(torch.equal(first[i], second[i]) for i in first)


LABEL_PIPELINE = [dict(type='LoadGraspScene', num_points=1000),
                  dict(type='SampleGraspLabels', grids='deferred', min_points=10,
                       min_object_points=20, point_fraction=0.5),
                  dict(type='RandomFlipRotateScene'),
                  dict(type='PackGraspInputs')]


def label_rows(batches) -> dict:
    """{(epoch, sample_idx): [(object id, collision offset, label rows, label points, pose)]}"""
    out = {}
    for batch in batches:
        for sample in batch['data_samples']:
            out[(sample.epoch, sample.sample_idx)] = [
                (o.object_id, o.deferred.collision_offset, o.deferred.rows.tolist(),
                 o.points.numpy().tobytes(), o.pose.numpy().tobytes())
                for o in sample.grasp_labels]
    return out


def test_workers_do_not_change_label_rows(synthetic_root):
    """The label points each sample keeps (drawn from its (seed, epoch, index) stream after the
    cloud) do not depend on the number of loader workers either."""
    dataset = GraspNetDataset(synthetic_root, pipeline=LABEL_PIPELINE)
    serial, parallel = label_rows(load_all(dataset, 0)), label_rows(load_all(dataset, 2))
    assert serial.keys() == parallel.keys() == {(e, i) for e in (0, 1) for i in range(6)}
    assert serial == parallel
    assert all(serial[key] for key in serial)  # every frame has labelled objects
    assert serial[(0, 0)] != serial[(1, 0)]  # the rows are drawn anew each epoch
