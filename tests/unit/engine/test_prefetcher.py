"""DevicePrefetcher: a pass-through on the CPU (said once), used by the train loop; on CUDA the
batches arrive on the device through one long-lived stream, and a batch whose copy is held up
on the side stream is not read before the copy lands."""
from unittest import mock

import pytest
import torch
from torch.utils.data import DataLoader

from mmgrasp.engine import DevicePrefetcher, GraspEpochBasedTrainLoop, prefetcher
from mmgrasp.registry import MODELS


def batches(n: int = 3):
    return [{'inputs': {'points': [torch.full((4, 3), float(i)), torch.zeros(4, 3)]},
             'data_samples': [f'sample {i}']} for i in range(n)]


@pytest.mark.skipif(torch.cuda.is_available(), reason='the CPU pass-through')
def test_cpu_pass_through_says_so_once():
    source = batches()
    with mock.patch.object(prefetcher, 'print_log') as log:
        wrapped = DevicePrefetcher(source)
        for _ in range(2):  # epochs
            assert [id(b) for b in wrapped] == [id(b) for b in source]
    assert len(wrapped) == 3 and wrapped.stream is None
    log.assert_called_once()
    assert 'no CUDA device' in log.call_args.args[0]


def test_train_loop_iterates_through_the_prefetcher():
    loader = DataLoader(list(range(6)), batch_size=2)
    loop = GraspEpochBasedTrainLoop(mock.MagicMock(), loader, max_epochs=1)
    assert isinstance(loop.prefetcher, DevicePrefetcher) and loop.prefetcher.loader is loader
    seen = []
    loop.run_iter = lambda idx, batch: seen.append((idx, batch.tolist()))
    with mock.patch.object(DevicePrefetcher, '__iter__', autospec=True,
                           side_effect=DevicePrefetcher.__iter__) as iterate:
        loop.run_epoch()
    iterate.assert_called_once_with(loop.prefetcher)
    assert seen == [(0, [0, 1]), (1, [2, 3]), (2, [4, 5])]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_cuda_batches_arrive_on_the_device_through_one_stream():
    wrapped = DevicePrefetcher(batches())
    stream = wrapped.stream
    for _ in range(2):  # epochs reuse the stream
        out = list(wrapped)
        assert wrapped.stream is stream and len(out) == 3
        for got, expected in zip(out, batches()):
            assert got['data_samples'] == expected['data_samples']
            for a, b in zip(got['inputs']['points'], expected['inputs']['points']):
                assert a.is_cuda and torch.equal(a.cpu(), b)
    assert list(DevicePrefetcher([])) == []
    preprocessor = MODELS.build(dict(type='GraspDataPreprocessor')).cuda()
    moved = out[0]['inputs']['points'][0]
    assert preprocessor._move(moved) is moved  # not copied again


def _spinning_loader(prefetcher_ref: list, n: int, size: int):
    """Batches of ``size`` floats filled with 1, 2, ...; before each is handed to the
    prefetcher, a spin kernel is queued on the prefetcher's side stream, so its copy lands
    late: a consumer that did not wait for it would read memory not yet written."""
    for i in range(n):
        with torch.cuda.stream(prefetcher_ref[0].stream):
            torch.cuda._sleep(1 << 26)
        yield {'inputs': {'points': [torch.full((size, ), float(i + 1)).pin_memory()]},
               'data_samples': [i]}


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_cuda_batch_is_handed_over_only_after_its_copy():
    ref = []
    wrapped = DevicePrefetcher(_spinning_loader(ref, 6, 1 << 20))
    ref.append(wrapped)
    seen = []
    for batch in wrapped:
        points = batch['inputs']['points'][0]
        seen.append(torch.stack([points.min(), points.max()]))  # read on the compute stream
        torch.cuda._sleep(1 << 26)  # still busy when the next copies are queued
    torch.cuda.synchronize()
    assert [s.tolist() for s in seen] == [[float(i + 1)] * 2 for i in range(6)]
