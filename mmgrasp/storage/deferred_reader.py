"""The deferred reader of the label store: one pass per batch over memory-mapped rows.

A :class:`StoreGrids` record (a few hundred bytes plus the row numbers) is what a loader worker
ships per object instead of its grids. Inside the model, :meth:`StoreGrids.gather` serves a
whole batch of requests at once:

1. the requests (object, row[, view]) come to the host in one transfer;
2. they are grouped by file and de-duplicated; every distinct row (or, with views, every
   distinct (row, view) cell block) is copied once, in file order, with
   ``np.take(memmap, rows, out=buffer, mode='clip')`` into one reused host buffer (page-locked
   when CUDA is available), together with the bit-packed scene-collision rows and the small
   index arrays (from a published store, the range requests of both in one wave:
   :func:`read_rows_many`);
3. that buffer goes to the device in one transfer; there the collision bits are unpacked and
   written into the scores as zeros, tolerance levels become radii, and rows are expanded to
   the requests that share them, in request order.

Gathers may run on several threads at once (``nn.DataParallel``, a thread pool): each borrows
a buffer of its own from a small pool for the whole read, so no two reads share one.
"""
import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from .label_maps import open_maps
from .label_store import COLLISION_BITORDER, zero_where
from .remote_source import is_url
from .remote_store import read_url_rows, read_url_rows_many

_ALIGN = 8


class ReadBuffer:
    """One host buffer reused by every read; grows to the largest read and is kept.

    Page-locked when CUDA is available, so the copy to the device can be asynchronous; the
    next read waits for that copy before overwriting the buffer.
    """

    def __init__(self):
        self._storage: Optional[Tensor] = None
        self._copy_done = None

    def acquire(self, nbytes: int) -> Tensor:
        if self._copy_done is not None:
            self._copy_done.synchronize()
            self._copy_done = None
        if self._storage is None or self._storage.numel() < nbytes:
            capacity = max(nbytes, 2 * self._storage.numel() if self._storage is not None else 0)
            self._storage = torch.empty(capacity, dtype=torch.uint8,
                                        pin_memory=torch.cuda.is_available())
        return self._storage[:nbytes]

    def to_device(self, host: Tensor, device: torch.device) -> Tensor:
        if device.type != 'cuda':
            return host  # consumers index it (a copy) before the next read
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


@dataclass(frozen=True, eq=False)
class StoreGrids:
    """Where the grids of one object instance's kept label points live in a label store.

    Attributes:
        store: the store folder.
        object_id: 0-based object id (selects ``objects/%03d``).
        rows: (n,) int32 rows of the object's files, one per kept label point.
        grid: (V, A, D).
        collision_mode: ``'zero_scores'``, ``'mask'`` or ``'none'``.
        has_tolerance: whether tolerance is carried.
        scene: scene id (selects ``scenes/%04d/collision.npy``).
        collision_offset: first row of this instance in the scene's collision file.
        matched_cells: the store holds the object's μ codes and per-view summaries, so label
            matching can read those instead of whole rows (:mod:`.matched_reader`).
    """
    store: str
    object_id: int
    rows: np.ndarray
    grid: Tuple[int, int, int]
    collision_mode: str
    has_tolerance: bool
    scene: int
    collision_offset: int
    matched_cells: bool = False

    @property
    def num_points(self) -> int:
        return len(self.rows)

    def object_file(self, name: str) -> str:
        return f'{self.store}/objects/{self.object_id:03d}/{name}.npy'

    def collision_file(self) -> str:
        return f'{self.store}/scenes/{self.scene:04d}/collision.npy'

    def summary_file(self, name: str) -> str:
        """Per-view summary ``name``: of the scene instance (rows offset by
        ``collision_offset``) when collisions apply to μ, else of the object."""
        if self.collision_mode == 'none':
            return self.object_file(name)
        return f'{self.store}/scenes/{self.scene:04d}/{name}.npy'

    @classmethod
    def gather(cls, readers: Sequence['StoreGrids'], name: str, owner: Tensor, rows: Tensor,
               views: Optional[Tensor]) -> Optional[Tensor]:
        return _gather(readers, name, owner, rows, views)

    @classmethod
    def supports_matched_cells(cls, readers: Sequence['StoreGrids']) -> bool:
        return all(r.matched_cells for r in readers)

    @classmethod
    def gather_view_summaries(cls, readers: Sequence['StoreGrids'], names: Sequence[str],
                              owner: Tensor, rows: Tensor, views: Tensor,
                              first_cell_widths: bool = False) -> dict:
        from .matched_reader import gather_view_summaries  # it builds on this module
        return gather_view_summaries(readers, names, owner, rows, views, first_cell_widths)

    @classmethod
    def gather_view_cells(cls, readers: Sequence['StoreGrids'], names: Sequence[str],
                          owner: Tensor, rows: Tensor, views: Tensor) -> dict:
        from .matched_reader import gather_view_cells  # it builds on this module
        return gather_view_cells(readers, names, owner, rows, views)


# ------------------------------------------------------------------------------- building blocks
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


class _Transfer:
    """Segments of one host buffer that go to the device in a single copy."""

    def __init__(self):
        self._segments: List[Tuple[str, np.dtype, tuple, int]] = []
        self.nbytes = 0

    def add(self, key: str, dtype, shape: tuple) -> None:
        dtype = np.dtype(dtype)
        self._segments.append((key, dtype, shape, self.nbytes))
        self.nbytes += _aligned(int(np.prod(shape)) * dtype.itemsize)

    def host_views(self, host: Tensor) -> dict:
        raw = host.numpy()
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


def _file_rows(readers: Sequence[StoreGrids], owner: np.ndarray, rows: np.ndarray) -> np.ndarray:
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


def _collision_rows(readers: Sequence[StoreGrids], owner: np.ndarray,
                    file_rows: np.ndarray) -> np.ndarray:
    """Row of every request in its scene's collision file."""
    offsets = np.array([r.collision_offset for r in readers], dtype=np.int64)
    return file_rows + offsets[owner]


def _value_keys(file_rows: np.ndarray, views: Optional[np.ndarray], num_views: int) -> np.ndarray:
    """Rows of the (N, V, A, D) file, or with views rows of its (N·V, A, D) reshape."""
    return file_rows if views is None else file_rows * num_views + views


def _group(paths: List[str], owner: np.ndarray, keys: np.ndarray):
    """File index per reader, then distinct (file, key) in file order with inverse."""
    unique_paths, reader_file = np.unique(np.array(paths), return_inverse=True)
    return list(unique_paths), distinct_in_file_order(reader_file[owner], keys)


def _gather(readers: Sequence[StoreGrids], name: str, owner: Tensor, rows: Tensor,
            views: Optional[Tensor]) -> Optional[Tensor]:
    first = readers[0]
    modes = {r.collision_mode for r in readers}
    if len(modes) > 1:
        raise ValueError(f'objects of one gather mix collision modes {sorted(modes)}')
    mode = first.collision_mode
    if name == 'collision' and mode != 'mask':
        return None
    device = owner.device
    grid = first.grid
    V, A, D = grid
    cells = V * A * D
    request = torch.cat([owner[:, None], rows[:, None]]
                        + ([views.reshape(len(owner), views.shape[1] if views.dim() == 2 else 1)]
                           if views is not None else []), dim=1)
    request = request.cpu().numpy().astype(np.int64)  # the one transfer to the host
    owner_np, rows_np = request[:, 0], request[:, 1]
    views_np = request[:, 2:] if views is not None else None
    if views_np is not None and views_np.size and (views_np.min() < 0 or views_np.max() >= V):
        raise IndexError(f'view index out of range 0..{V - 1}')
    file_rows = _file_rows(readers, owner_np, rows_np)
    K = len(owner_np)
    # One view per request: read only that view's cells. Several: read whole rows and pick
    # the views while expanding on the device.
    cell_views = views_np[:, 0] if views is not None and views.dim() == 1 else None

    transfer = _Transfer()
    plan = {}
    if name != 'collision':
        paths = [r.object_file(name) for r in readers]
        keys = _value_keys(file_rows, cell_views, V)
        row_shape = (V, A, D) if cell_views is None else (A, D)
        files, (pair_file, pair_key, inverse) = _group(paths, owner_np, keys)
        dtype = np.uint8 if name == 'tolerance' else np.float32
        plan['values'] = (files, pair_file, pair_key, row_shape)
        transfer.add('values', dtype, (len(pair_key), *row_shape))
        transfer.add('values_index', np.int64, (K,))
    with_collision = name == 'collision' or (
        mode == 'zero_scores' and name in ('scores', 'tolerance'))
    if with_collision:
        paths = [r.collision_file() for r in readers]
        files, (c_file, c_key, c_inverse) = _group(
            paths, owner_np, _collision_rows(readers, owner_np, file_rows))
        nbytes = (cells + 7) // 8
        plan['collision'] = (files, c_file, c_key, (nbytes,))
        transfer.add('collision', np.uint8, (len(c_key), nbytes))
        transfer.add('collision_index', np.int64, (K,))
    if name == 'tolerance':
        radii = [open_maps().get(r.object_file('tolerance_radii')) for r in readers]
        radius_start = np.concatenate([[0], np.cumsum([len(t) for t in radii])[:-1]])
        transfer.add('radii', np.float32, (sum(len(t) for t in radii),))
        transfer.add('radius_start', np.int64, (K,))
    if views is not None and views.dim() == 2:
        transfer.add('views', np.int64, views_np.shape)

    with _buffers.borrow() as buffer:  # until the rows are expanded into new memory
        host = buffer.acquire(transfer.nbytes)
        staged = transfer.host_views(host)
        read_rows_many([(*plan[key], staged[key]) for key in plan])
        if 'values' in plan:
            staged['values_index'][:] = inverse
        if 'collision' in plan:
            staged['collision_index'][:] = c_inverse
        if name == 'tolerance':
            staged['radii'][:] = np.concatenate(radii)
            staged['radius_start'][:] = radius_start[owner_np]
        if 'views' in staged:
            staged['views'][:] = views_np
        on_device = transfer.device_views(buffer.to_device(host, device))
        if cell_views is not None:
            on_device['cell_views'] = views
        return _assemble(on_device, name, grid)


def _expand(rows: Tensor, index: Tensor, views: Optional[Tensor]) -> Tensor:
    """rows[index] (or rows[index, views] for (K, W) views) into new memory, in request order.

    On the CPU numpy does the copy: it allocates large outputs on huge pages, which torch's
    allocator does not, and page faults would otherwise cost as much as the copy.
    """
    if rows.device.type == 'cpu':
        array, index = rows.numpy(), index.numpy()
        if views is None:
            return torch.from_numpy(np.take(array, index, axis=0))
        return torch.from_numpy(array[index[:, None], views.numpy()])
    return rows[index] if views is None else rows[index[:, None], views]


def _assemble(data: dict, name: str, grid: Tuple[int, int, int]) -> Tensor:
    """On the device: unpack collision bits, expand rows to requests (selecting views), apply
    collisions, turn tolerance levels into radii."""
    V, A, D = grid
    views = data.get('views')
    collided = None
    if 'collision' in data:
        bits = unpack_bits(data['collision'], V * A * D).view(-1, V, A, D)
        collided = _expand(bits, data['collision_index'], views)
        if 'cell_views' in data:
            collided = collided[torch.arange(len(collided), device=collided.device),
                                data['cell_views']]
    if name == 'collision':
        return collided
    values = _expand(data['values'], data['values_index'], views)
    if name == 'tolerance':
        start = data['radius_start'].view(-1, *([1] * (values.dim() - 1)))
        values = data['radii'][start + values.long()]
    if collided is not None:  # μ = 0 (and tolerance 0): collided grasps are invalid
        if values.device.type == 'cpu':
            zero_where(values.numpy(), collided.numpy())
        else:
            values.masked_fill_(collided, 0)
    return values
