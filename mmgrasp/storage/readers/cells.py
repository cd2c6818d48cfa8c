"""Matched-cell reads of the label store: what label matching uses, not whole rows.

Stage one of an assigner needs, per matched label row, a few per-view summaries
(:mod:`..labels.summaries`, a few hundred bytes a row); stage two, at the view the network chose,
the A·D cells of that one view: one-byte μ codes, widths, tolerance levels and the bits of the
scene-collision row that cover the view. Both reads go the way :mod:`.common` describes:
requests to the host in one transfer, distinct rows once, in file
order, through one :func:`~.common.read_rows_many` call a stage (looked up at every
call; memory-map reads all go through ``read_rows``, a published store's range requests of all
the stage's arrays go out in one wave) into one reused (page-locked) buffer, one
transfer to the device; there codes become μ through the objects' value tables, bits are
unpacked, and rows are expanded to the requests (and to the re-indexed views) that share them.
"""
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..labels.maps import open_maps
from ..labels.store import packed_row_bytes
from ..labels.summaries import SUMMARY_DTYPES
from . import common
from .common import Transfer, expand_small, group_by_file, request_file_rows, unpack_bits_torch
from .location import GridLocation

CODED_SUMMARIES = ('view_min_mu', 'view_min_mu_any', 'view_max_mu')
CELL_NAMES = ('scores', 'widths', 'tolerance', 'collision')
_TABLE = 256  # every value table padded to 256 entries; code 255 (none) reads +0.0


def _to_host(readers: Sequence[GridLocation], owner: Tensor, rows: Tensor, views: Tensor
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not all(r.matched_cells for r in readers):
        raise ValueError('matched-cell read of objects without μ codes in the label store')
    if len({r.collision_mode for r in readers}) > 1:
        raise ValueError('objects of one gather mix collision modes')
    request = torch.cat([owner[:, None], rows[:, None], views.reshape(len(owner), -1)], dim=1)
    request = request.cpu().numpy().astype(np.int64)  # the one transfer to the host
    V = readers[0].grid[0]
    if request[:, 2:].size and (request[:, 2:].min() < 0 or request[:, 2:].max() >= V):
        raise IndexError(f'view index out of range 0..{V - 1}')
    return request[:, 0], request[:, 1], request[:, 2:]


def _tables(readers: Sequence[GridLocation], owner: np.ndarray, transfer: Transfer
            ) -> Tuple[List[str], np.ndarray]:
    """Distinct value-table files and each request's first table entry."""
    paths, table_of_reader = np.unique([r.object_file('score_values') for r in readers],
                                       return_inverse=True)
    transfer.add('tables', np.float32, (len(paths) * _TABLE,))
    transfer.add('table_start', np.int64, (len(owner),))
    return list(paths), table_of_reader[owner] * _TABLE


def _stage_tables(staged: dict, paths: List[str], start: np.ndarray) -> None:
    tables = staged['tables'].reshape(len(paths), _TABLE)
    tables[:] = 0
    for i, path in enumerate(paths):
        values = open_maps().get(path)
        tables[i, :len(values)] = values
    staged['table_start'][:] = start


def _decode(data: dict, codes: Tensor) -> Tensor:
    """μ of uint8 codes (K, ...) through each request's value table."""
    start = data['table_start'].view(-1, *([1] * (codes.dim() - 1)))
    return data['tables'][start + codes.long()]


def gather_view_summaries(readers: Sequence[GridLocation], names: Sequence[str], owner: Tensor,
                          rows: Tensor, views: Tensor, first_cell_widths: bool = False
                          ) -> Dict[str, Tensor]:
    """Per-view summaries of request k's row at object views ``views[k]`` (K, W), each (K, W):
    ``view_count`` uint8, the μ summaries as float32 μ (+0.0 where a view has none), and
    ``view_best_width`` float32. With ``first_cell_widths`` also ``first_cell_width`` (K,): the
    width of cell (0, 0) at view ``views[k, 0]``; with μ summaries also ``value_tables``, every
    μ value of the objects' tables (padded with +0.0), as a host numpy array."""
    unknown = set(names) - set(SUMMARY_DTYPES)
    if unknown:
        raise KeyError(f'unknown view summaries {sorted(unknown)}; expected {list(SUMMARY_DTYPES)}')
    owner_np, rows_np, views_np = _to_host(readers, owner, rows, views)
    V, A, D = readers[0].grid
    file_rows = request_file_rows(readers, owner_np, rows_np)
    summary_rows = file_rows if readers[0].collision_mode == 'none' else \
        file_rows + np.array([r.collision_offset for r in readers], np.int64)[owner_np]
    K = len(owner_np)
    transfer, plan = Transfer(), {}
    for name in names:
        files, (pair_file, pair_key, inverse) = group_by_file(
            [r.summary_file(name) for r in readers], owner_np, summary_rows)
        plan[name] = (files, pair_file, pair_key)
        transfer.add(name, SUMMARY_DTYPES[name], (len(pair_key), V))
    transfer.add('summary_index', np.int64, (K,))
    transfer.add('views', np.int64, views_np.shape)
    if any(n in CODED_SUMMARIES for n in names):
        table_files, table_start = _tables(readers, owner_np, transfer)
    if first_cell_widths:
        keys = (file_rows * V + views_np[:, 0]) * (A * D)
        files, (w_file, w_key, w_inverse) = group_by_file(
            [r.object_file('widths') for r in readers], owner_np, keys)
        plan['first_cell_width'] = (files, w_file, w_key)
        transfer.add('first_cell_width', np.float32, (len(w_key),))
        transfer.add('first_cell_index', np.int64, (K,))

    with common.borrow_buffer() as buffer:
        host, raw = buffer.acquire(transfer.nbytes)
        staged = transfer.host_views(raw)
        common.read_rows_many([(*plan[name], () if name == 'first_cell_width' else (V,),
                                staged[name]) for name in plan])
        if names:
            staged['summary_index'][:] = inverse
        staged['views'][:] = views_np
        if any(n in CODED_SUMMARIES for n in names):
            _stage_tables(staged, table_files, table_start)
        if first_cell_widths:
            staged['first_cell_index'][:] = w_inverse
        data = transfer.device_views(buffer.to_device(host, owner.device))
        out = {}
        for name in names:
            values = expand_small(data[name], data['summary_index'], data['views'])
            out[name] = _decode(data, values) if name in CODED_SUMMARIES else values
        if first_cell_widths:
            out['first_cell_width'] = expand_small(data['first_cell_width'],
                                              data['first_cell_index'], None)
        if any(n in CODED_SUMMARIES for n in names):
            out['value_tables'] = staged['tables'].copy()  # host: no device read to check them
        return out


def _collision_windows(readers: Sequence[GridLocation], owner: np.ndarray, file_rows: np.ndarray,
                       views: np.ndarray) -> Tuple[list, np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray, np.ndarray, int]:
    """The bytes of each request's scene-collision row that hold its view's A·D bits.

    Returns (files, byte_file, byte_key, byte_of_pair (P, W), pair_shift (P,), pair_index (K,),
    W): distinct bytes in file order, each distinct (row, view) pair's W bytes as positions in
    them (the last needed byte repeated past the view's end), its bit shift in the first byte,
    and each request's pair.
    """
    V, A, D = readers[0].grid
    cells, nbytes = A * D, packed_row_bytes(readers[0].grid)
    width = (cells + 7) // 8 + 1
    rows = file_rows + np.array([r.collision_offset for r in readers], np.int64)[owner]
    files, (pair_file, pair_key, pair_index) = group_by_file(
        [r.collision_file() for r in readers], owner, rows * V + views)
    first_bit = (pair_key % V) * cells
    start = (pair_key // V) * nbytes + first_bit // 8
    last = (pair_key // V) * nbytes + (first_bit + cells - 1) // 8
    keys = np.minimum(start[:, None] + np.arange(width), last[:, None])
    byte_file = np.repeat(pair_file, width)
    combined = byte_file << 40 | keys.reshape(-1)
    distinct, byte_of_pair = np.unique(combined, return_inverse=True)
    return (files, distinct >> 40, distinct & ((1 << 40) - 1), byte_of_pair.reshape(-1, width),
            first_bit % 8, pair_index, width)


def gather_view_cells(readers: Sequence[GridLocation], names: Sequence[str], owner: Tensor,
                      rows: Tensor, views: Tensor) -> Dict[str, Tensor]:
    """The (A, D) cells of request k's row at object view ``views[k]`` (K,), each (K, A, D):
    ``scores`` float32 raw μ (decoded from one-byte codes), ``widths`` float32, ``tolerance``
    float32 radii, ``collision`` bool scene collision (``'zero_scores'`` and ``'mask'`` only).
    Nothing is applied: the caller writes the collisions into μ and tolerance."""
    unknown = set(names) - set(CELL_NAMES)
    if unknown:
        raise KeyError(f'unknown cell names {sorted(unknown)}; expected {list(CELL_NAMES)}')
    owner_np, rows_np, views_np = _to_host(readers, owner, rows, views)
    views_np = views_np[:, 0]
    V, A, D = readers[0].grid
    file_rows = request_file_rows(readers, owner_np, rows_np)
    keys = file_rows * V + views_np
    K = len(owner_np)
    names = [n for n in names if n != 'collision' or readers[0].collision_mode != 'none']
    transfer, plan = Transfer(), {}
    sources = dict(scores=('score_codes', np.uint8), widths=('widths', np.float32),
                   tolerance=('tolerance', np.uint8))
    for name in names:
        if name == 'collision':
            continue
        stem, dtype = sources[name]
        files, (pair_file, pair_key, inverse) = group_by_file(
            [r.object_file(stem) for r in readers], owner_np, keys)
        plan[name] = (files, pair_file, pair_key)
        transfer.add(name, dtype, (len(pair_key), A, D))
    if any(n != 'collision' for n in names):
        transfer.add('cell_index', np.int64, (K,))
    if 'scores' in names:
        table_files, table_start = _tables(readers, owner_np, transfer)
    if 'tolerance' in names:
        radii = [open_maps().get(r.object_file('tolerance_radii')) for r in readers]
        radius_start = np.concatenate([[0], np.cumsum([len(t) for t in radii])[:-1]])
        transfer.add('radii', np.float32, (sum(len(t) for t in radii),))
        transfer.add('radius_start', np.int64, (K,))
    if 'collision' in names:
        c_files, c_file, c_key, byte_of_pair, shift, c_index, width = _collision_windows(
            readers, owner_np, file_rows, views_np)
        transfer.add('collision', np.uint8, (len(c_key),))
        transfer.add('byte_of_pair', np.int64, byte_of_pair.shape)
        transfer.add('bit_shift', np.int64, shift.shape)
        transfer.add('collision_index', np.int64, (K,))

    with common.borrow_buffer() as buffer:
        host, raw = buffer.acquire(transfer.nbytes)
        staged = transfer.host_views(raw)
        reads = [(*plan[name], (A, D), staged[name]) for name in plan]
        if 'collision' in names:
            reads.append((c_files, c_file, c_key, (), staged['collision']))
        common.read_rows_many(reads)
        if plan:
            staged['cell_index'][:] = inverse
        if 'scores' in names:
            _stage_tables(staged, table_files, table_start)
        if 'tolerance' in names:
            staged['radii'][:] = np.concatenate(radii)
            staged['radius_start'][:] = radius_start[owner_np]
        if 'collision' in names:
            staged['byte_of_pair'][:] = byte_of_pair
            staged['bit_shift'][:] = shift
            staged['collision_index'][:] = c_index
        data = transfer.device_views(buffer.to_device(host, owner.device))
        out = {}
        for name in plan:
            values = expand_small(data[name], data['cell_index'], None)
            if name == 'scores':
                values = _decode(data, values)
            elif name == 'tolerance':
                start = data['radius_start'].view(-1, 1, 1)
                values = data['radii'][start + values.long()]
            out[name] = values
        if 'collision' in names:
            out['collision'] = _window_bits(data, A * D, width).view(-1, A, D)
        return out


def _window_bits(data: dict, cells: int, width: int) -> Tensor:
    """(K, cells) bool: each request's view bits out of its pair's collision bytes."""
    windows = data['collision'][data['byte_of_pair']]  # (P, W)
    bits = unpack_bits_torch(windows.contiguous(), 8 * width)
    take = data['bit_shift'][:, None] + torch.arange(cells, device=bits.device)
    per_pair = torch.gather(bits, 1, take)
    return expand_small(per_pair, data['collision_index'], None)
