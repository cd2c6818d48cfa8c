"""Derived assets of the label store that label matching reads instead of whole rows.

What the recipes' targets use of a matched label row before the network has chosen a view is a
handful of numbers per object view (below, "after collisions" means with μ := 0 where the scene
collision mask is set, which is what ``collision='zero_scores'`` and ``'mask'`` give the
assigner; under ``'none'`` the raw μ):

- ``view_count`` (uint8): cells with 0 < μ ≤ 0.6 (GSNet's view graspness, before the width
  mask), after collisions;
- ``view_min_mu`` (uint8 μ code, 255 = none): the smallest μ among cells with μ > 0 and width
  ≤ 0.1. GraspNet-baseline's view label is the max over the cells of ln(u_max / μ), which is
  ln(u_max / min μ) because the log ratio is monotone in μ (the assigner checks that on the
  batch's μ values);
- ``view_min_mu_any`` (uint8 code): the same without the width mask (``all_view_widths=False``);
- ``view_max_mu`` (uint8 code): the largest μ of the view, −1 and 0 included (u_max is the
  batch's largest μ over all re-indexed slots, and re-indexing may leave views out);
- ``view_best_width`` (float32): the width of the first cell, in (A, D) order, that holds
  ``view_min_mu`` (Scale-Balanced-Grasp weighs a seed by the width of its best grasp; 0 where
  the view has no such cell, and then never read).

μ codes (``score_codes.npy``, uint8 per cell) index a per-object table of the exact float32
values (``score_values.npy``, distinct bit patterns, +0.0 always included since collisions write
it): lossless, a quarter of the bytes. An object with more than 255 distinct μ keeps only its
float32 scores; its rows are then matched through whole rows.

Summaries of collided μ depend on the scene instance, so they live per scene, row for row with
``scenes/%04d/collision.npy``; the raw ones per object.
"""
from typing import Dict, Optional, Tuple

import numpy as np

#: thresholds the summaries are built with (GSNet's view graspness; GRASP_MAX_WIDTH)
SUMMARY_VIEW_MAX_MU = 0.6
SUMMARY_MAX_WIDTH = 0.1
NO_CODE = 255
MAX_CODES = 255
SUMMARY_DTYPES = dict(view_count=np.uint8, view_min_mu=np.uint8, view_min_mu_any=np.uint8,
                      view_max_mu=np.uint8, view_best_width=np.float32)
_CHUNK_CELLS = 1 << 23


def score_value_table(scores: np.ndarray) -> Optional[np.ndarray]:
    """Sorted distinct float32 bit patterns of ``scores`` and +0.0, as float32; None when more
    than :data:`MAX_CODES`."""
    bits = np.unique(np.ascontiguousarray(scores, dtype=np.float32).view(np.uint32))
    bits = np.union1d(bits, np.zeros(1, np.uint32))
    return None if len(bits) > MAX_CODES else bits.view(np.float32)


def encode_scores(scores: np.ndarray, table: np.ndarray) -> np.ndarray:
    """uint8 codes with ``table[codes]`` equal to ``scores`` bit for bit."""
    bits = np.ascontiguousarray(scores, dtype=np.float32).view(np.uint32)
    return np.searchsorted(table.view(np.uint32), bits).astype(np.uint8)


def _codes_of(values: np.ndarray, table: np.ndarray, present: np.ndarray) -> np.ndarray:
    codes = np.searchsorted(table.view(np.uint32), values.astype(np.float32).view(np.uint32))
    return np.where(present, codes, NO_CODE).astype(np.uint8)


def view_summaries(mu: np.ndarray, widths: np.ndarray, table: np.ndarray,
                   collided: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """Every summary of rows (n, V, A, D) of μ and widths, each (n, V); μ := 0 where
    ``collided`` (n, V, A, D) is set (memory maps are read a chunk of rows at a time)."""
    n, V = mu.shape[:2]
    out = {name: np.empty((n, V), dtype) for name, dtype in SUMMARY_DTYPES.items()}
    step = max(1, _CHUNK_CELLS // max(1, int(np.prod(mu.shape[1:]))))
    view_max_mu, max_width = np.float32(SUMMARY_VIEW_MAX_MU), np.float32(SUMMARY_MAX_WIDTH)
    for start in range(0, n, step):
        m = np.array(mu[start:start + step], np.float32).reshape(-1, V, mu[0, 0].size)
        if collided is not None:  # μ := 0 where collided, in place (no boolean gather)
            np.copyto(m, 0, where=np.asarray(collided[start:start + step]).reshape(m.shape))
        w = np.asarray(widths[start:start + step], np.float32).reshape(m.shape)
        s = slice(start, start + len(m))
        positive = m > 0
        out['view_count'][s] = np.count_nonzero(positive & (m <= view_max_mu), axis=-1)
        masked = positive & (w <= max_width)
        # the smallest selected μ, inf where none (a masked reduction: no filled copy of m)
        low = np.minimum.reduce(m, axis=-1, where=masked, initial=np.inf)
        has = masked.any(-1)
        out['view_min_mu'][s] = _codes_of(np.where(has, low, 0), table, has)
        low_any = np.minimum.reduce(m, axis=-1, where=positive, initial=np.inf)
        has_any = positive.any(-1)
        out['view_min_mu_any'][s] = _codes_of(np.where(has_any, low_any, 0), table, has_any)
        out['view_max_mu'][s] = _codes_of(m.max(-1), table, np.ones(m.shape[:2], bool))
        first = (masked & (m == low[..., None])).argmax(-1)
        best = np.take_along_axis(w, first[..., None], -1)[..., 0]
        out['view_best_width'][s] = np.where(has, best, np.float32(0))
    return out


def summaries_supported(grid: Tuple[int, int, int]) -> bool:
    """Counts of a view's cells fit a byte."""
    return grid[1] * grid[2] <= 255


def save_summaries(folder: str, summaries: Dict[str, np.ndarray], save) -> None:
    for name, array in summaries.items():
        save(f'{folder}/{name}.npy', array)
