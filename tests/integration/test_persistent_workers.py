"""persistent_workers=True is safe: no random state lives in a worker (EpochAwareSampler yields
(epoch, index), the sample RNG is derived from (seed, epoch, index)). Two epochs through the
Runner-built loader give the same samples with and without persistent workers, epoch 2 unlike
epoch 1, and the same as the dataset read in this process from the PNG/MAT files."""
import glob
import os

import torch
from mmengine.config import Config
from mmengine.runner import Runner

from mmgrasp.datasets import GraspNetDataset

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def record_pid(results: dict) -> dict:
    results['worker_pid'] = os.getpid()
    return results


def pipeline(source: str) -> list:
    return [dict(type='LoadGraspScene', num_points=800, with_graspness=True, source=source),
            dict(type='SampleGraspLabels', grids='deferred', min_points=10, min_object_points=20),
            dict(type='RandomFlipRotateScene'), record_pid,
            dict(type='PackGraspInputs', meta_keys=('epoch', 'sample_idx', 'worker_pid'))]


def two_epochs(root: str, persistent: bool) -> tuple:
    """{(epoch, sample_idx): points} of two epochs, two workers reading the frame store, and
    the worker processes of each epoch."""
    loader = Runner.build_dataloader(dict(
        batch_size=2, num_workers=2, persistent_workers=persistent,
        sampler=dict(type='mmgrasp.EpochAwareSampler', shuffle=True),
        collate_fn=dict(type='pseudo_collate'),
        dataset=dict(type='mmgrasp.GraspNetDataset', data_root=root, seed=7,
                     pipeline=pipeline('frames'))), seed=0)
    samples, workers = {}, []
    for epoch in (0, 1):
        loader.sampler.set_epoch(epoch)
        workers.append(set())
        for batch in loader:
            for sample, points in zip(batch['data_samples'], batch['inputs']['points']):
                samples[(sample.epoch, sample.sample_idx)] = points
                workers[-1].add(sample.worker_pid)
    return samples, workers


def test_epoch_two_identical_with_and_without_persistent_workers(synthetic_root):
    (persistent, kept), (fresh, renewed) = (two_epochs(synthetic_root, p) for p in (True, False))
    assert len(kept[0]) == 2 and kept[0] == kept[1]  # the same two workers served both epochs
    assert not renewed[0] & renewed[1]
    assert persistent.keys() == fresh.keys() == {(e, i) for e in (0, 1) for i in range(6)}
    files = GraspNetDataset(synthetic_root, seed=7, pipeline=pipeline('files'))
    for (epoch, index), points in persistent.items():
        assert torch.equal(points, fresh[(epoch, index)]), (epoch, index)
        assert torch.equal(points, files[(epoch, index)]['inputs']['points']), (epoch, index)
    for index in range(6):
        assert not torch.equal(persistent[(0, index)], persistent[(1, index)]), index


def test_shipped_configs_keep_persistent_workers():
    for path in sorted(glob.glob(os.path.join(REPO, 'configs', '*.py'))):
        loader = Config.fromfile(path).train_dataloader
        assert loader.num_workers == 0 or loader.persistent_workers is True, path
