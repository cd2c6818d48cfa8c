"""The matched-cell reads on the device: staged in the page-locked read buffer, one transfer,
codes decoded, collision bits unpacked and rows expanded on the device, with the values of the
CPU read bit for bit; nothing returned aliases the reused buffer (a later read leaves earlier
results unchanged). The CPU runs check the same on the host."""
import numpy as np
import pytest
import torch

import mmgrasp.storage.readers.common as read_common
from mmgrasp.storage.labels import summaries as view_summaries
from mmgrasp.structures.grasp_labels import gather_view_cells, gather_view_summaries

needs_cuda = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]
DEVICES = ['cpu', pytest.param('cuda', marks=needs_cuda)]
CELLS = ['scores', 'widths', 'tolerance', 'collision']


@pytest.fixture(scope='module')
def objects(make_dataset):
    dataset = make_dataset('deferred', augment=False, tolerance=True)
    objects = [o for i in (0, 4) for o in dataset[i]['data_samples'].grasp_labels]
    assert objects and all(o.deferred.matched_cells for o in objects)
    return objects


def _requests(objects, seed, count=400, views=5):
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, len(objects), count)
    rows = np.array([rng.integers(0, objects[o].num_points) for o in owner])
    return (torch.from_numpy(owner), torch.from_numpy(rows),
            torch.from_numpy(rng.integers(0, views, (count, views))))


def _read(objects, device, seed):
    owner, rows, views = (t.to(device) for t in _requests(objects, seed))
    cells = gather_view_cells(objects, CELLS, owner, rows, views[:, 0])
    summaries = gather_view_summaries(objects, list(view_summaries.SUMMARY_DTYPES), owner, rows,
                                      views, first_cell_widths=True)
    return {**cells, **summaries}


@pytest.mark.parametrize('device', DEVICES)
def test_matched_reads_on_the_device_equal_the_cpu(objects, device, monkeypatch):
    transfers = []
    original = read_common.ReadBuffer.to_device

    def counted(self, host, target):
        transfers.append(host.is_pinned() if target.type == 'cuda' else None)
        return original(self, host, target)

    monkeypatch.setattr(read_common.ReadBuffer, 'to_device', counted)
    got = _read(objects, device, seed=0)
    assert len(transfers) == 2  # one per read (summaries, cells)
    if device == 'cuda':
        assert all(transfers)  # from the page-locked buffer
    want = _read(objects, 'cpu', seed=0)
    host = {k for k, v in want.items() if isinstance(v, np.ndarray)}  # the value tables
    assert host == {'value_tables'} and np.array_equal(got['value_tables'], want['value_tables'])
    for name, value in want.items():
        if name in host:
            continue
        assert got[name].device.type == device, name
        assert got[name].dtype == value.dtype and torch.equal(got[name].cpu(), value), name
    kept = {k: v.copy() if k in host else v.clone() for k, v in got.items()}
    _read(objects, device, seed=1)  # reuses the buffer
    if device == 'cuda':
        torch.cuda.synchronize()
    for name, value in kept.items():
        same = np.array_equal if name in host else torch.equal
        assert same(got[name], value), f'{name} aliases the read buffer'
