"""What the two label readers share (:mod:`.rows`: whole rows; :mod:`.cells`: matched cells).

Both serve a batch of requests in one pass: the requests come to the host in one transfer, are
grouped by file and de-duplicated, every distinct row (or cell block) is copied once, in file
order, by :func:`read_rows_many` (memory maps through :func:`read_rows`, a published store's
range requests in one wave) into one host buffer (page-locked when CUDA is available,
:class:`ReadBuffer`, lent by :func:`borrow_buffer`), which goes to the device in one copy
(:class:`Transfer`; on the CPU the buffer itself is handed over, never a view of reused memory);
there rows are expanded to the requests that share them (:func:`expand`).

Readers look :func:`read_rows_many` and :func:`borrow_buffer` up in this module at every call:
benchmarks and tests wrap them here.
"""
import contextlib
import os
import threading
import time
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..labels.maps import open_maps
from ..labels.store import COLLISION_BITORDER
from ..remote.sources import is_url
from ..remote.store import read_url_rows, read_url_rows_many
from .location import GridLocation

_ALIGN = 8


class ReadBuffer:
    """One host buffer reused by every read to a CUDA device; grows to the largest read and is
    kept. Page-locked when CUDA is available, so the copy to the device can be asynchronous; the
    next read waits for that copy before overwriting the buffer. A read to the CPU keeps no
    copy: the buffer's memory goes to the caller (:meth:`to_device`).
    """

    def __init__(self):
        self._storage: Optional[Tensor] = None
        self._array: Optional[np.ndarray] = None
        self._copy_done = None

    def acquire(self, nbytes: int) -> Tuple[Tensor, np.ndarray]:
        """The first ``nbytes`` of the buffer, as a tensor (for :meth:`to_device`) and as the
        numpy array the rows are copied into (made once per allocation: a host read of a
        tensor is a sync on the launch counter's count)."""
        if self._copy_done is not None:
            self._copy_done.synchronize()
            self._copy_done = None
        if self._storage is None or self._storage.numel() < nbytes:
            capacity = max(nbytes, 2 * self._storage.numel() if self._storage is not None else 0)
            if torch.cuda.is_available():
                self._storage = torch.empty(capacity, dtype=torch.uint8, pin_memory=True)
                self._array = self._storage.numpy()
            else:  # numpy puts large arrays on huge pages: fresh ones fault in as fast as reused
                self._array = np.empty(max(capacity, _ALIGN), dtype=np.uint8)  # stride 1
                self._storage = torch.from_numpy(self._array)
        return self._storage[:nbytes], self._array[:nbytes]

    def to_device(self, host: Tensor, device: torch.device) -> Tensor:
        """``host`` (the acquired bytes) on ``device``. On the CPU the buffer hands its memory
        over to the caller instead of copying it: what a gather returns never aliases memory
        that the next read overwrites, and the next read allocates a buffer of its own (one
        allocation, its pages faulted in as the rows are written, per CPU gather, in place of
        reusing one: numpy's huge pages keep that as fast as reuse, 14 against 17 ms for 32 MiB
        staged in one run, where torch.empty's small pages took 36 ms)."""
        if device.type != 'cuda':
            self._storage = self._array = None
            return host
        # The copy runs on the target device's current stream (not necessarily the current
        # device's): the event that the next acquire waits for is recorded on that stream.
        stream = torch.cuda.current_stream(device)
        out = host.to(device, non_blocking=True)
        self._copy_done = torch.cuda.Event()
        self._copy_done.record(stream)
        return out


class BufferPool:
    """Read buffers lent to one gather at a time. A single-threaded run reuses one buffer for
    every read; concurrent gathers get one each, and keep them for later reads (threads of
    ``nn.DataParallel`` are new at every forward, their buffers are not)."""

    def __init__(self):
        self._free: List[ReadBuffer] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def borrow(self):
        with self._lock:
            buffer = self._free.pop() if self._free else ReadBuffer()
        try:
            yield buffer
        finally:
            with self._lock:
                self._free.append(buffer)


_buffers = BufferPool()
_map_copy_seconds = 0.0
_map_copy_bytes = 0
_seconds_lock = threading.Lock()


def _forget_parent_buffers() -> None:
    """A forked worker starts without the parent's buffers (and, see label_maps, its maps)."""
    global _buffers, _seconds_lock
    _buffers, _seconds_lock = BufferPool(), threading.Lock()


os.register_at_fork(after_in_child=_forget_parent_buffers)


@contextlib.contextmanager
def borrow_buffer() -> Iterator[ReadBuffer]:
    """A read buffer of this process's pool, for the whole of one gather."""
    with _buffers.borrow() as buffer:
        yield buffer


def unpack_bits(packed: Tensor, cells: int) -> Tensor:
    """(K, nbytes) uint8 -> (K, cells) bool, the store's bit order, on packed's device."""
    if packed.device.type == 'cpu':
        bits = np.unpackbits(packed.numpy(), axis=1, count=cells, bitorder=COLLISION_BITORDER)
        return torch.from_numpy(bits.view(bool))
    return unpack_bits_torch(packed, cells)


def unpack_bits_torch(packed: Tensor, cells: int) -> Tensor:
    """:func:`unpack_bits` with torch operations, for tensors on an accelerator."""
    shifts = torch.arange(8, device=packed.device, dtype=torch.uint8)
    if COLLISION_BITORDER == 'big':
        shifts = shifts.flip(0)
    bits = (packed.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(len(packed), packed.shape[1] * 8)[:, :cells].bool()


def distinct_in_file_order(file_ids: np.ndarray, keys: np.ndarray
                           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (file, key) pairs sorted by file then key, and each request's position in them.

    Returns (pair_file, pair_key, inverse) with ``pair_*[inverse[k]]`` equal to request k.
    """
    combined = file_ids.astype(np.int64) << 40 | keys.astype(np.int64)
    distinct, inverse = np.unique(combined, return_inverse=True)
    return distinct >> 40, distinct & ((1 << 40) - 1), inverse


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


class Transfer:
    """Segments of one host buffer that go to the device in a single copy."""

    def __init__(self):
        self._segments: List[Tuple[str, np.dtype, tuple, int]] = []
        self.nbytes = 0

    def add(self, key: str, dtype, shape: tuple) -> None:
        dtype = np.dtype(dtype)
        self._segments.append((key, dtype, shape, self.nbytes))
        self.nbytes += _aligned(int(np.prod(shape)) * dtype.itemsize)

    def host_views(self, raw: np.ndarray) -> dict:
        return {key: raw[off:off + int(np.prod(shape)) * dt.itemsize].view(dt).reshape(shape)
                for key, dt, shape, off in self._segments}

    def device_views(self, device_buffer: Tensor) -> dict:
        out = {}
        for key, dt, shape, off in self._segments:
            nbytes = int(np.prod(shape)) * dt.itemsize
            chunk = device_buffer[off:off + nbytes]
            out[key] = chunk.view(_TORCH_DTYPES[dt]).reshape(shape)
        return out


_TORCH_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.int64): torch.int64,
                 np.dtype(np.float32): torch.float32}


def read_rows(paths: Sequence[str], file_ids: np.ndarray, keys: np.ndarray, row_shape: tuple,
              out: np.ndarray) -> None:
    """Copy rows ``keys`` of files ``paths[file_ids]`` (sorted by file, then key) into ``out``.

    Each file is viewed as (rows, *row_shape); with views the row is one view's (A, D) block.
    Files addressed by URL (a published store) are read by :func:`read_url_rows`: planned,
    coalesced, concurrent range requests and a local block cache.
    """
    if len(paths) and is_url(paths[0]):
        return read_url_rows(paths, file_ids, keys, row_shape, out)
    global _map_copy_seconds, _map_copy_bytes
    begin = time.perf_counter()
    bounds = np.flatnonzero(np.diff(file_ids)) + 1
    for start, stop in zip(np.r_[0, bounds], np.r_[bounds, len(file_ids)]):
        if start == stop:
            continue
        path = paths[file_ids[start]]
        array = open_maps().get(path)
        table = array.reshape(-1, *row_shape)
        segment = keys[start:stop]
        if segment[-1] >= len(table):
            raise IndexError(f'{path}: row {segment[-1]} requested but the file has {len(table)} '
                             f'rows of {row_shape}; the label store does not match this record')
        np.take(table, segment, axis=0, out=out[start:stop], mode='clip')
    with _seconds_lock:
        _map_copy_seconds += time.perf_counter() - begin
        _map_copy_bytes += out.nbytes


#: one read of :func:`read_rows`: (paths, file_ids, keys, row_shape, out)
ReadRequest = Tuple[Sequence[str], np.ndarray, np.ndarray, tuple, np.ndarray]


def read_rows_many(requests: Sequence[ReadRequest]) -> None:
    """Several :func:`read_rows` of one gather at once. Local files are copied one request
    after the other through :func:`read_rows` (looked up at every call: the one place
    memory-map reads go); the requests of a published store go to :func:`read_url_rows_many`
    together, so their range requests are in flight in one wave instead of one per request."""
    remote = []
    for request in requests:
        if len(request[0]) and is_url(request[0][0]):
            remote.append(request)
        else:
            read_rows(*request)
    if remote:
        read_url_rows_many(remote)


def pop_map_copy_bytes() -> int:
    """Bytes this process copied out of the memory maps since the last call (benchmarks)."""
    global _map_copy_bytes
    with _seconds_lock:
        nbytes, _map_copy_bytes = _map_copy_bytes, 0
    return nbytes


def pop_map_copy_seconds() -> float:
    """Seconds this process spent copying rows out of the memory maps since the last call
    (benchmarks report it as the share of the assigner that is the deferred read)."""
    global _map_copy_seconds
    with _seconds_lock:
        seconds, _map_copy_seconds = _map_copy_seconds, 0.0
    return seconds


def request_file_rows(readers: Sequence[GridLocation], owner: np.ndarray, rows: np.ndarray
                      ) -> np.ndarray:
    """File row of every request: ``readers[owner[k]].rows[rows[k]]``."""
    counts = np.array([r.num_points for r in readers], dtype=np.int64)
    if len(owner) and (owner.min() < 0 or owner.max() >= len(readers)):
        raise IndexError(f'owner index out of range for {len(readers)} objects')
    if len(rows) and ((rows < 0) | (rows >= counts[owner])).any():
        bad = int(np.flatnonzero((rows < 0) | (rows >= counts[owner]))[0])
        raise IndexError(f'request {bad} reads row {rows[bad]} of object {owner[bad]}, which has '
                         f'{counts[owner[bad]]} label points')
    starts = np.concatenate([[0], np.cumsum(counts)])
    flat = np.concatenate([r.rows for r in readers]).astype(np.int64)
    return flat[starts[owner] + rows]


def group_by_file(paths: List[str], owner: np.ndarray, keys: np.ndarray):
    """File index per reader, then distinct (file, key) in file order with inverse."""
    unique_paths, reader_file = np.unique(np.array(paths), return_inverse=True)
    return list(unique_paths), distinct_in_file_order(reader_file[owner], keys)


def expand(rows: Tensor, index: Tensor, views: Optional[Tensor]) -> Tensor:
    """rows[index] (or rows[index, views] for (K, W) views) into new memory, in request order.

    On the CPU numpy does the copy: it allocates large outputs (whole (V, A, D) rows per
    request) on huge pages, which torch's allocator does not, and page faults would otherwise
    cost as much as the copy. Small outputs take :func:`expand_small`.
    """
    if rows.device.type == 'cpu':
        array, index = rows.numpy(), index.numpy()
        if views is None:
            return torch.from_numpy(np.take(array, index, axis=0))
        return torch.from_numpy(array[index[:, None], views.numpy()])
    return rows[index] if views is None else rows[index[:, None], views]


def expand_small(rows: Tensor, index: Tensor, views: Optional[Tensor]) -> Tensor:
    """:func:`expand` in torch on every device, for the matched-cell reads' small outputs
    ((K, A, D) cells, (K, W) summaries): no tensor is handed to numpy, which the launch
    counter would count as a host read."""
    return rows[index] if views is None else rows[index[:, None], views]
