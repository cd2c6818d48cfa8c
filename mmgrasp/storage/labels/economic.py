"""EconomicGrasp's compact labels, derived from the label store's dense rows.

The rules are those of ``dataset/generate_economic.py`` of iSEE-Laboratory/EconomicGrasp
@7361bb6, which makes one ``<scene>_labels.npz`` per scene. For one scene, in meta
``cls_indexes`` order of its instances (every comparison in float32, as the script's torch
tensors of the float32 labels compare with Python scalars):

1. μ := 0 where the scene collides, then μ := 0 where μ < 0;
2. a label point is kept when some cell has 0 < μ ≤ 0.4;
3. view graspness: the cells of the view with 0 < μ ≤ 0.6, divided by 48 (the script's
   constant, A·D of the 12 × 4 grid; A·D here), then min–max normalised per point with
   ``+ 1e-5`` in the denominator;
4. μ := 0 where not (μ > 0 and width ≤ 0.1), then score = 1.1 − μ where μ > 0;
5. per (view, angle) the best depth (first on ties, as ``torch.max``), per view the best
   angle and its depth, score and width; the width is taken where the score is 0 too;
6. views ordered by graspness, top k (``torch.topk``, its own order among equal values);
   ``vgraspness`` stays in view-id order while the per-view arrays follow ``topview``.

Stored quantised as the script does: angle and depth indices uint8, scores ``(s · 10)`` and
widths ``(w · 1000)`` cast to uint8 — truncation, not rounding, and a width over 0.255 m wraps
(the script's quirk, reproduced: the same float32 product and the same cast) —, views uint16,
the instance index uint8. ``quantize=False`` keeps scores and widths in float32 (score as
computed, width in metres); ``view_dtype`` chooses the dtype of ``topview``.
"""
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

#: the script's constants
KEEP_MAX_MU = 0.4
VIEW_MAX_MU = 0.6
VIEW_NORM_EPS = 1e-5
MAX_WIDTH = 0.1
SCORE_OFFSET = 1.1
SCORE_SCALE = 10
WIDTH_SCALE = 1000
VIEW_DTYPES = ('uint16', 'int32')
#: per-row arrays of a scene, row for row
ROW_ARRAYS = ('points', 'pointid', 'object_row', 'rotations', 'depth', 'scores', 'widths',
              'vgraspness', 'topview')


def economic_rows(scores: np.ndarray, widths: np.ndarray, collided: np.ndarray,
                  top_k: int = 300, quantize: bool = True,
                  view_dtype: str = 'uint16') -> Dict[str, np.ndarray]:
    """Economic arrays of one instance's rows (n, V, A, D) of raw μ, widths and scene
    collision, for its kept points only (``object_row``: their rows among the n)."""
    if view_dtype not in VIEW_DTYPES:
        raise ValueError(f'view_dtype={view_dtype!r}: expected one of {VIEW_DTYPES}')
    n, V, A, D = scores.shape
    mu = np.array(scores, np.float32).reshape(n, V, A, D)
    mu[np.asarray(collided, bool).reshape(mu.shape)] = 0
    mu[mu < 0] = 0
    good = (mu <= np.float32(KEEP_MAX_MU)) & (mu > 0)
    keep = np.flatnonzero(good.reshape(n, -1).any(1))
    mu = mu[keep]
    width = np.array(widths, np.float32).reshape(n, V, A, D)[keep]

    view_valid = (mu <= np.float32(VIEW_MAX_MU)) & (mu > 0)
    graspness = view_valid.sum((2, 3)).astype(np.float32) / np.float32(A * D)
    low = graspness.min(1, keepdims=True)
    high = graspness.max(1, keepdims=True)
    graspness = (graspness - low) / (high - low + np.float32(VIEW_NORM_EPS))

    labelled = (mu > 0) & (width <= np.float32(MAX_WIDTH))
    score = np.where(labelled, np.float32(SCORE_OFFSET) - mu, np.float32(0))
    best_depth = score.argmax(-1)  # (m, V, A), first maximum
    score_vd = np.take_along_axis(score, best_depth[..., None], -1)[..., 0]
    width_vd = np.take_along_axis(width, best_depth[..., None], -1)[..., 0]
    best_angle = score_vd.argmax(-1)  # (m, V)
    depth = np.take_along_axis(best_depth, best_angle[..., None], -1)[..., 0]
    score_v = np.take_along_axis(score_vd, best_angle[..., None], -1)[..., 0]
    width_v = np.take_along_axis(width_vd, best_angle[..., None], -1)[..., 0]

    k = min(top_k, V)
    # the script's call, so that the order among equal graspness values is the same
    top = torch.topk(torch.from_numpy(graspness), k=k).indices.numpy()
    pick = lambda a: np.take_along_axis(a, top, 1)  # noqa: E731
    out = dict(object_row=keep.astype(np.int32), rotations=pick(best_angle).astype(np.uint8),
               depth=pick(depth).astype(np.uint8), vgraspness=graspness,
               topview=top.astype(view_dtype))
    if quantize:
        out['scores'] = (pick(score_v) * np.float32(SCORE_SCALE)).astype(np.uint8)
        out['widths'] = (pick(width_v) * np.float32(WIDTH_SCALE)).astype(np.uint8)
    else:
        out['scores'], out['widths'] = pick(score_v), pick(width_v)
    return out


def economic_scene(instances: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                   **options) -> Dict[str, np.ndarray]:
    """The arrays of one scene: ``instances`` in meta order, each (points, μ, widths,
    collided); rows of instance i carry ``pointid`` i (uint8, as the script)."""
    parts: List[Dict[str, np.ndarray]] = []
    for i, (points, mu, widths, collided) in enumerate(instances):
        rows = economic_rows(mu, widths, collided, **options)
        rows['points'] = np.asarray(points, np.float32)[rows['object_row']]
        rows['pointid'] = np.full(len(rows['object_row']), i, np.uint8)
        parts.append(rows)
    return {name: np.concatenate([p[name] for p in parts]) for name in ROW_ARRAYS}


def decode_scores(scores: np.ndarray) -> np.ndarray:
    """Float32 scores as the reference dataset reads them (``/ 10.`` of the uint8)."""
    return scores.astype(np.float32) / 10. if scores.dtype == np.uint8 else scores


def decode_widths(widths: np.ndarray) -> np.ndarray:
    """Float32 metres as the reference dataset reads them (``/ 1000.`` of the uint8)."""
    return widths.astype(np.float32) / 1000. if widths.dtype == np.uint8 else widths
