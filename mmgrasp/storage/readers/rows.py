"""Whole-row reads of the label store: the deferred grids, one pass per batch.

A :class:`StoreGrids` record (a few hundred bytes plus the row numbers) is what a loader worker
ships per object instead of its grids. Inside the model, :meth:`~.grids.StoreGrids.gather` (:func:`gather_rows`) serves a
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
from typing import Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..labels.maps import open_maps
from ..labels.store import zero_where
from . import common
from .common import Transfer, expand, group_by_file, request_file_rows, unpack_bits
from .location import GridLocation


def collision_rows(readers: Sequence[GridLocation], owner: np.ndarray,
                    file_rows: np.ndarray) -> np.ndarray:
    """Row of every request in its scene's collision file."""
    offsets = np.array([r.collision_offset for r in readers], dtype=np.int64)
    return file_rows + offsets[owner]


def value_keys(file_rows: np.ndarray, views: Optional[np.ndarray], num_views: int) -> np.ndarray:
    """Rows of the (N, V, A, D) file, or with views rows of its (N·V, A, D) reshape."""
    return file_rows if views is None else file_rows * num_views + views


def gather_rows(readers: Sequence[GridLocation], name: str, owner: Tensor, rows: Tensor,
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
    file_rows = request_file_rows(readers, owner_np, rows_np)
    K = len(owner_np)
    # One view per request: read only that view's cells. Several: read whole rows and pick
    # the views while expanding on the device.
    cell_views = views_np[:, 0] if views is not None and views.dim() == 1 else None

    transfer = Transfer()
    plan = {}
    if name != 'collision':
        paths = [r.object_file(name) for r in readers]
        keys = value_keys(file_rows, cell_views, V)
        row_shape = (V, A, D) if cell_views is None else (A, D)
        files, (pair_file, pair_key, inverse) = group_by_file(paths, owner_np, keys)
        dtype = np.uint8 if name == 'tolerance' else np.float32
        plan['values'] = (files, pair_file, pair_key, row_shape)
        transfer.add('values', dtype, (len(pair_key), *row_shape))
        transfer.add('values_index', np.int64, (K,))
    with_collision = name == 'collision' or (
        mode == 'zero_scores' and name in ('scores', 'tolerance'))
    if with_collision:
        paths = [r.collision_file() for r in readers]
        files, (c_file, c_key, c_inverse) = group_by_file(
            paths, owner_np, collision_rows(readers, owner_np, file_rows))
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

    with common.borrow_buffer() as buffer:  # until the rows are expanded into new memory
        host, raw = buffer.acquire(transfer.nbytes)
        staged = transfer.host_views(raw)
        common.read_rows_many([(*plan[key], staged[key]) for key in plan])
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
        return assemble(on_device, name, grid)


def assemble(data: dict, name: str, grid: Tuple[int, int, int]) -> Tensor:
    """On the device: unpack collision bits, expand rows to requests (selecting views), apply
    collisions, turn tolerance levels into radii."""
    V, A, D = grid
    views = data.get('views')
    collided = None
    if 'collision' in data:
        bits = unpack_bits(data['collision'], V * A * D).view(-1, V, A, D)
        collided = expand(bits, data['collision_index'], views)
        if 'cell_views' in data:
            collided = collided[torch.arange(len(collided), device=collided.device),
                                data['cell_views']]
    if name == 'collision':
        return collided
    values = expand(data['values'], data['values_index'], views)
    if name == 'tolerance':
        start = data['radius_start'].view(-1, *([1] * (values.dim() - 1)))
        values = data['radii'][start + values.long()]
    if collided is not None:  # μ = 0 (and tolerance 0): collided grasps are invalid
        if values.device.type == 'cpu':
            zero_where(values.numpy(), collided.numpy())
        else:
            values.masked_fill_(collided, 0)
    return values
