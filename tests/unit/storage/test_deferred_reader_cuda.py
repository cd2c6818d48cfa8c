"""The deferred reader's CUDA path: the page-locked read buffer is not overwritten while its
previous copy to the device is still queued, and nothing a gather returns aliases the buffer.

The copy is delayed on purpose: ``torch.cuda._sleep`` queues a spin kernel on the stream the
copy goes to, so an ``acquire`` that did not wait would overwrite the buffer before the copy
ran. On one stream a gather's own request transfer (a synchronising device-to-host copy)
already orders it after the previous copy; a gather on another stream relies on the event.
``test_a_reader_that_does_not_wait_is_caught`` shows that the check catches a missing wait.
The alias checks run on the CPU too (the buffer is then returned as is, and indexed).
"""
import numpy as np
import pytest
import torch

import mmgrasp.storage.readers.common as read_common
from mmgrasp.structures.grasp_labels import gather_grids

needs_cuda = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]
DEVICES = ['cpu', pytest.param('cuda', marks=needs_cuda)]
SPIN = 1 << 28  # GPU cycles, about 0.1-0.3 s: much longer than filling the buffer


def deferred_objects(make_dataset, frames=(0, 4)):
    """Deferred labels of two frames (zero_scores collision), one list over both frames."""
    dataset = make_dataset('deferred', augment=False)
    objects = [o for i in frames for o in dataset[i]['data_samples'].grasp_labels]
    assert objects and all(o.is_deferred for o in objects)
    return objects


def requests(objects, seed: int, count: int, device: str):
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, len(objects), count)
    rows = np.array([rng.integers(0, objects[o].num_points) for o in owner])
    views = rng.integers(0, 5, count)
    return tuple(torch.from_numpy(a).to(device) for a in (owner, rows, views))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_the_next_acquire_waits_for_the_copy_in_flight():
    buffer = read_common.ReadBuffer()
    host, _ = buffer.acquire(1 << 24)
    assert host.is_pinned()
    host.fill_(1)
    torch.cuda._sleep(SPIN)  # the copy below queues behind this
    on_device = buffer.to_device(host, torch.device('cuda'))
    again, _ = buffer.acquire(1 << 24)  # must block until the copy has run
    assert again.data_ptr() == host.data_ptr()  # the same memory is reused
    again.fill_(2)
    assert bool((on_device == 1).all())


def _gathers_on_two_streams(objects, monkeypatch):
    """Gather 1 on one stream with its copy held up, then gather 2 on another stream (whose
    request transfer does not wait for stream 1). Returns both results and the CPU path's."""
    original = read_common.ReadBuffer.to_device

    def delayed(self, host, device):
        torch.cuda._sleep(SPIN)
        return original(self, host, device)

    monkeypatch.setattr(read_common.ReadBuffer, 'to_device', delayed)
    first, second = requests(objects, 0, 300, 'cuda'), requests(objects, 1, 300, 'cuda')
    torch.cuda.synchronize()
    with torch.cuda.stream(torch.cuda.Stream()):
        got_first = gather_grids(objects, 'scores', *first[:2])
    with torch.cuda.stream(torch.cuda.Stream()):
        got_second = gather_grids(objects, 'scores', *second[:2])
    torch.cuda.synchronize()
    return (got_first.cpu(), got_second.cpu(),
            gather_grids(objects, 'scores', *(t.cpu() for t in first[:2])),
            gather_grids(objects, 'scores', *(t.cpu() for t in second[:2])))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_a_gather_on_another_stream_waits_for_the_copy_in_flight(make_dataset, monkeypatch):
    objects = deferred_objects(make_dataset)
    got_first, got_second, want_first, want_second = _gathers_on_two_streams(objects,
                                                                            monkeypatch)
    assert torch.equal(got_first, want_first)
    assert torch.equal(got_second, want_second)


@pytest.mark.cuda
def _only_buffer(monkeypatch) -> 'read_common.ReadBuffer':
    """A fresh pool holding one buffer, which every single-threaded gather then borrows."""
    pool = read_common.BufferPool()
    buffer = read_common.ReadBuffer()
    pool._free.append(buffer)
    monkeypatch.setattr(read_common, '_buffers', pool)
    return buffer


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_a_reader_that_does_not_wait_is_caught(make_dataset, monkeypatch):
    """Mutation check: with the wait removed, the delayed copy carries the second read's rows."""
    objects = deferred_objects(make_dataset)
    original = read_common.ReadBuffer.acquire

    def acquire_without_waiting(self, nbytes):
        self._copy_done = None
        return original(self, nbytes)

    monkeypatch.setattr(read_common.ReadBuffer, 'acquire', acquire_without_waiting)
    buffer = _only_buffer(monkeypatch)
    buffer.acquire(64 << 20)  # large enough for both reads: no reallocation
    got_first, _, want_first, _ = _gathers_on_two_streams(objects, monkeypatch)
    assert not torch.equal(got_first, want_first)


def _storage_span(tensor: torch.Tensor) -> tuple:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


@pytest.mark.parametrize('device', DEVICES)
def test_gathered_tensors_do_not_alias_the_read_buffer(make_dataset, device, monkeypatch):
    buffer = _only_buffer(monkeypatch)
    objects = deferred_objects(make_dataset)
    owner, rows, views = requests(objects, 2, 200, device)
    results = {}
    for name in ('scores', 'widths'):
        for with_views in (False, True):
            results[name, with_views] = gather_grids(objects, name, owner, rows,
                                                     views if with_views else None)
    kept = {key: value.clone() for key, value in results.items()}
    if device == 'cpu':  # the CPU read handed its memory over: the buffer keeps none
        assert buffer._storage is None
    else:
        buffer_begin, buffer_end = _storage_span(buffer._storage)
        for key, value in results.items():
            begin, end = _storage_span(value)
            assert end <= buffer_begin or begin >= buffer_end, key  # no overlap with the buffer
    for seed in (3, 4):  # later reads overwrite the buffer (and free device copies)
        gather_grids(objects, 'scores', *requests(objects, seed, 400, device)[:2])
    if device == 'cuda':
        torch.cuda.synchronize()
    for key, value in results.items():
        assert torch.equal(value, kept[key]), key
