"""An independent numpy implementation of EconomicGrasp's ``process_grasp_labels``
(``utils/label_generation.py`` and ``utils/loss_utils.py`` of iSEE-Laboratory/EconomicGrasp
@7361bb6), one frame at a time and one object at a time as the reference loops, on arrays that
the caller decodes as the reference dataset does (``/ 10.``, ``/ 1000.``)."""
import numpy as np


def reference_views(V: int) -> np.ndarray:
    """``generate_grasp_views``: numpy float64, then float32."""
    phi = (np.sqrt(5) - 1) / 2
    views = []
    for i in range(V):
        z = (2 * i + 1) / V - 1
        views.append([np.sqrt(1 - z ** 2) * np.cos(2 * i * np.pi * phi),
                      np.sqrt(1 - z ** 2) * np.sin(2 * i * np.pi * phi), z])
    return np.array(views).astype(np.float32)


def viewpoint_matrices(towards: np.ndarray) -> np.ndarray:
    """``batch_viewpoint_params_to_matrix(towards, 0)``."""
    x = towards.astype(np.float32)
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(len(x), np.float32)], -1)
    y[np.linalg.norm(y, axis=-1) == 0, 1] = 1
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = y / np.linalg.norm(y, axis=-1, keepdims=True)
    return np.stack([x, y, np.cross(x, y)], -1)


def process_frame(seeds, pred_views, poses, objects, last_write_wins=True, max_distance=0.005):
    """Targets of one frame. ``objects[i]``: dict of the instance's points (n, 3), rotations,
    depth, scores, widths, topview (n, K) and vgraspness (n, V), decoded."""
    V = objects[0]['vgraspness'].shape[1]
    views = reference_views(V)
    merged = {k: [] for k in ('points', 'rot', 'graspness', 'slots', 'rotations', 'depth',
                              'scores', 'widths')}
    for pose, o in zip(poses, objects):
        n = len(o['points'])
        pts = (pose @ np.concatenate([o['points'], np.ones((n, 1), np.float32)], 1).T).T
        rotated = (pose[:, :3] @ views.T).T
        view_inds = np.array([np.argmin(((rotated - views[j]) ** 2).sum(1)) for j in range(V)])
        rot = pose[:, :3] @ viewpoint_matrices(-views)
        slots = -np.ones(o['topview'].shape, np.int64)
        for p in range(n):
            for t in range(o['topview'].shape[1]):
                for j in (range(V) if last_write_wins else reversed(range(V))):
                    if view_inds[j] == o['topview'][p, t]:
                        slots[p, t] = j
        merged['points'].append(pts)
        merged['rot'].append(np.broadcast_to(rot[view_inds], (n, V, 3, 3)))
        merged['graspness'].append(o['vgraspness'][:, view_inds])
        merged['slots'].append(slots)
        for k in ('rotations', 'depth', 'scores', 'widths'):
            merged[k].append(o[k])
    merged = {k: np.concatenate(v) for k, v in merged.items()}
    nn = np.array([np.argmin(((merged['points'] - s) ** 2).sum(1)) for s in seeds])
    out = dict(point=merged['points'][nn], view_rot=merged['rot'][nn, pred_views],
               graspness=merged['graspness'][nn], rotations=np.full(len(seeds), 12, np.int32),
               depth=np.full(len(seeds), 4, np.int32), scores=np.zeros(len(seeds), np.float32),
               widths=np.full(len(seeds), 0.1, np.float32))
    matched = np.zeros(len(seeds), bool)
    for m, (row, v) in enumerate(zip(nn, pred_views)):
        hits = np.flatnonzero(merged['slots'][row] == v)
        if len(hits):
            matched[m] = True
            for k in ('rotations', 'depth', 'scores', 'widths'):
                out[k][m] = merged[k][row, hits[0]]
    out['valid'] = (np.linalg.norm(seeds - out['point'], axis=-1) < max_distance) & matched
    return out
