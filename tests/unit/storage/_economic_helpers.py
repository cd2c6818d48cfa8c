"""An independent numpy implementation of EconomicGrasp's label script, written from
``dataset/generate_economic.py`` (iSEE-Laboratory/EconomicGrasp @7361bb6) and working from the
RAW files of a GraspNet-1Billion-layout root (meta, grasp_label/*.npz, collision_label), and a
comparison that treats the order of views of equal graspness as the sort library's.

Each rule is a parameter so that mutation tests can show the comparison catches it.
"""
import os
from typing import Dict

import numpy as np
import scipy.io as scio

ORDERED = ('rotations', 'depth', 'scores', 'widths')  # follow topview


def raw_economic_scene(root: str, scene: int, camera: str = 'realsense', top_k: int = 300,
                       keep_max_mu: float = 0.4, view_max_mu: float = 0.6, eps: float = 1e-5,
                       max_width: float = 0.1, offset: float = 1.1,
                       views_by_graspness: bool = True, quantize: bool = True
                       ) -> Dict[str, np.ndarray]:
    """What the script writes for ``scene``; one point at a time, stable descending sort."""
    scene_dir = os.path.join(root, 'scenes', f'scene_{scene:04d}')
    meta = scio.loadmat(os.path.join(scene_dir, camera, 'meta', '0000.mat'))
    ids = meta['cls_indexes'].flatten().astype(np.int64) - 1
    collision = np.load(os.path.join(root, 'collision_label', f'scene_{scene:04d}',
                                     'collision_labels.npz'))
    f32 = np.float32
    out = {k: [] for k in ('points', 'pointid', 'rotations', 'depth', 'scores', 'widths',
                           'vgraspness', 'topview')}
    for instance, obj in enumerate(ids):
        label = np.load(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz'))
        collided = collision[f'arr_{instance}']
        for p in range(len(label['points'])):
            mu = label['scores'][p].astype(f32).copy()  # (V, A, D)
            width = label['offsets'][p, ..., 2].astype(f32)
            mu[collided[p]] = 0
            mu[mu < 0] = 0
            if not np.any((mu > 0) & (mu <= f32(keep_max_mu))):
                continue
            V, A, D = mu.shape
            count = np.count_nonzero((mu > 0) & (mu <= f32(view_max_mu)), axis=(1, 2))
            g = count.astype(f32) / f32(48 if A * D == 48 else A * D)
            g = (g - g.min()) / (g.max() - g.min() + f32(eps))
            score = np.zeros_like(mu)
            ok = (mu > 0) & (width <= f32(max_width))
            score[ok] = f32(offset) - mu[ok]
            angle = np.zeros(V, np.int64)
            depth = np.zeros(V, np.int64)
            for v in range(V):  # best depth of each angle, then the best angle; first on ties
                per_angle = score[v].max(1)
                a = int(np.flatnonzero(per_angle == per_angle.max())[0])
                angle[v], depth[v] = a, int(np.flatnonzero(score[v, a] == score[v, a].max())[0])
            s = score[np.arange(V), angle, depth]
            w = width[np.arange(V), angle, depth]
            order = np.argsort(-g, kind='stable') if views_by_graspness else np.arange(V)
            order = order[:top_k]
            out['points'].append(label['points'][p].astype(f32))
            out['pointid'].append(instance)
            out['rotations'].append(angle[order])
            out['depth'].append(depth[order])
            out['scores'].append(s[order])
            out['widths'].append(w[order])
            out['vgraspness'].append(g)
            out['topview'].append(order)
    arrays = {k: np.array(v) for k, v in out.items()}
    arrays['points'] = arrays['points'].astype(f32).reshape(-1, 3)
    arrays['pointid'] = arrays['pointid'].astype(np.uint8)
    arrays['rotations'] = arrays['rotations'].astype(np.uint8)
    arrays['depth'] = arrays['depth'].astype(np.uint8)
    arrays['vgraspness'] = arrays['vgraspness'].astype(f32)
    arrays['topview'] = arrays['topview'].astype(np.uint16)
    if quantize:
        arrays['scores'] = (arrays['scores'].astype(f32) * f32(10)).astype(np.uint8)
        arrays['widths'] = (arrays['widths'].astype(f32) * f32(1000)).astype(np.uint8)
    return arrays


def economic_mismatches(ref: Dict[str, np.ndarray], mine: Dict[str, np.ndarray]) -> list:
    """Names of the arrays that differ (empty when equal). ``topview`` and the arrays that
    follow it are compared view by view; views of equal graspness may come in any order, and
    at the top-k boundary only their number must agree."""
    bad = [k for k in ('points', 'pointid', 'vgraspness')
           if ref[k].dtype != mine[k].dtype or ref[k].shape != mine[k].shape
           or not np.array_equal(ref[k], mine[k])]
    if bad or ref['topview'].shape != mine['topview'].shape \
            or ref['topview'].dtype != mine['topview'].dtype:
        return bad + ['topview']
    g = ref['vgraspness']
    rows = np.arange(len(g))[:, None]
    for top in (ref['topview'], mine['topview']):
        along = g[rows, top.astype(np.int64)]
        if len(g) and not np.all(along[:, :-1] >= along[:, 1:]):
            return ['topview']
    if len(g) == 0:
        return []
    last = g[rows[:, 0], ref['topview'][:, -1].astype(np.int64)][:, None]
    sure = g > last  # views every top-k must hold
    for k in ORDERED:
        if ref[k].dtype != mine[k].dtype or ref[k].shape != mine[k].shape:
            bad.append(k)
            continue
        full = []
        for arrays in (ref, mine):
            f = np.full(g.shape, -1, np.float64)
            f[rows, arrays['topview'].astype(np.int64)] = arrays[k]
            full.append(f)
        held = [f >= 0 for f in full]
        if not (np.array_equal(held[0] & sure, sure) and np.array_equal(held[1] & sure, sure)
                and np.array_equal(np.where(sure, full[0], 0), np.where(sure, full[1], 0))):
            bad.append(k)
        elif held[0].shape[1] == ref[k].shape[1] and not np.array_equal(full[0], full[1]):
            bad.append(k)  # every view kept: all values compared
    return bad
