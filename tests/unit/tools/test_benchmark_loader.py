"""benchmark_loader.py's loader figures: a batch's bytes count a storage once however many
tensors view it; the workers' fixed CPU (started and stopped with no sample) is measured
apart from the per-sample rest; the send figures are the collate and the pickling."""
import argparse
import os
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, 'tools', 'analysis'))
import benchmark_loader  # noqa: E402


def test_a_storage_is_counted_once():
    flat = torch.zeros(1000)
    one = benchmark_loader.batch_bytes([flat[:10], flat[500:]])
    two = benchmark_loader.batch_bytes([torch.zeros(10), torch.zeros(500)])
    assert 4000 <= one < 4000 + 1024  # the buffer once (not 8 000), plus the pickled rest
    assert 2040 <= two < 2040 + 1024


def _sample(index):
    return {'inputs': {'points': torch.full((256, 3), float(index))}}


def test_worker_cpu_split_into_fixed_and_per_sample():
    out = benchmark_loader.loader_alone(_IndexDataset(), benchmark_loader.pseudo_collate,
                                        list(range(8)), 2, 1, argparse.Namespace(warmup=1))
    assert out['worker_fixed_ms'] > 0  # a worker's start and exit cost CPU
    assert out['worker_net_cpu_ms'] == pytest.approx(out['worker_cpu_ms']
                                                     - out['worker_fixed_ms'] / 8)


def test_send_figures_are_per_sample_cpu():
    out = benchmark_loader.send_cpu([_sample(i) for i in range(4)], 2)
    assert set(out) == {'collate', 'pickle to shared memory'}
    assert all(v >= 0 for v in out.values())


class _IndexDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return _sample(index)
