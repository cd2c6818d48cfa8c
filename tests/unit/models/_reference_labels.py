"""Plain numpy references of the label processing and losses of GSNet, GraspNet-baseline (BL)
and Scale-Balanced-Grasp (SBG), written from the published rules (shared/reference/graspnet.md
§2–5: graspness_implementation / graspnet-baseline / Scale-Balanced-Grasp
``utils/label_generation.py`` and ``models/loss.py``), not from mmgrasp.

They read the raw dataset files with numpy and scipy only (``grasp_label/%03d_labels.npz``,
``collision_label/scene_%04d/collision_labels.npz``, ``tolerance/%03d_tolerance.npy``,
``meta/%04d.mat``; on a GraspClutter6D root ``obj_%06d`` names, ``collision_label/%06d.npz``
and ``scene_gt.json``), never through mmgrasp's reader or label store. Which instance of the meta
file a labelled object is comes from its pose (``meta['poses'][:, :, i]``); its collision mask is
``arr_i`` of that position i, as the reference loaders index it. Its label rows come from its
label points (exact float32 matches in the npz points).

Comparisons of μ, widths and thresholds stay in float32 where the reference compares float32
tensors with python constants (μ ≤ 0.6, width ≤ 0.1); everything else is float64.
"""
import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.io

GRASP_MAX_WIDTH = np.float32(0.1)
GRASP_MAX_TOLERANCE = 0.05
THRESH_BAD = 0.1
VIEW_MU_THRESHOLD = np.float32(0.6)  # GSNet view graspness: 0 < μ ≤ 0.6


# ------------------------------------------------------------------------------ geometry (§2)
def fibonacci_views(n: int) -> np.ndarray:
    """(n, 3) unit view vectors of the Fibonacci lattice, float64."""
    phi = (np.sqrt(5) - 1) / 2
    i = np.arange(n, dtype=np.float64)
    z = (2 * i + 1) / n - 1
    r = np.sqrt(1 - z ** 2)
    return np.stack([r * np.cos(2 * np.pi * i * phi), r * np.sin(2 * np.pi * i * phi), z], -1)


def viewpoint_to_matrix(towards: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """(N, 3, 3): x = towards, y = normalise(−x_y, x_x, 0) (or (0, 1, 0)), z = x × y, · Rx."""
    x = towards / np.linalg.norm(towards, axis=-1, keepdims=True)
    y = np.stack([-towards[:, 1], towards[:, 0], np.zeros(len(towards))], -1)
    y[np.linalg.norm(y, axis=-1) == 0] = (0, 1, 0)
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    z = np.cross(x, y)
    c, s = np.cos(angle), np.sin(angle)
    rx = np.zeros((len(angle), 3, 3))
    rx[:, 0, 0] = 1
    rx[:, 1, 1], rx[:, 1, 2], rx[:, 2, 1], rx[:, 2, 2] = c, -s, s, c
    return np.stack([x, y, z], -1) @ rx


# ------------------------------------------------------------------------------ raw files (§1)
@dataclass
class RawObject:
    """One labelled object instance of a frame, from the raw files.

    pose: (3, 4) float64 model -> (augmented) camera; points: (n, 3) float64 model frame;
    scores μ, widths (offsets[..., 2]), tolerance: (n, V, A, D) float32, collided cells set to
    0 as the loaders do (unless collision='none'); collision: (n, V, A, D) bool arr_i rows.
    """
    instance: int
    object_id: int
    rows: np.ndarray
    pose: np.ndarray
    points: np.ndarray
    scores: np.ndarray
    widths: np.ndarray
    tolerance: Optional[np.ndarray]
    collision: np.ndarray


class RawDataset:
    """Reads the raw files of a GraspNet-1Billion root with numpy/scipy, caching per file."""

    def __init__(self, root: str, camera: str = 'realsense'):
        self.root, self.camera = root, camera
        # GraspClutter6D (BOP-style, split_info/): files by obj_id = object id + 1, poses in
        # scene_gt.json (mm) by image id 4·frame + 2 (the d435, which 'realsense' names)
        self.gc6d = os.path.isdir(os.path.join(root, 'split_info'))
        self._labels: Dict[int, dict] = {}
        self._collision: Dict[int, List[np.ndarray]] = {}

    def _object_file(self, folder: str, obj: int, suffix: str) -> str:
        name = f'obj_{obj + 1:06d}' if self.gc6d else f'{obj:03d}'
        return os.path.join(self.root, folder, f'{name}_{suffix}')

    def label(self, obj: int) -> dict:
        if obj not in self._labels:
            with np.load(self._object_file('grasp_label', obj, 'labels.npz')) as npz:
                label = dict(points=npz['points'].astype(np.float32),
                             scores=npz['scores'].astype(np.float32),
                             widths=npz['offsets'][..., 2].astype(np.float32))
            path = self._object_file('tolerance', obj, 'tolerance.npy')
            label['tolerance'] = np.load(path).astype(np.float32) if os.path.isfile(path) \
                else None
            label['row_of'] = {p.tobytes(): r for r, p in enumerate(label['points'])}
            self._labels[obj] = label
        return self._labels[obj]

    def collision(self, scene: int) -> List[np.ndarray]:
        if scene not in self._collision:
            path = (os.path.join(self.root, 'collision_label', f'{scene:06d}.npz') if self.gc6d
                    else os.path.join(self.root, 'collision_label', f'scene_{scene:04d}',
                                      'collision_labels.npz'))
            with np.load(path) as npz:
                self._collision[scene] = [npz[f'arr_{i}'] for i in range(len(npz.files))]
        return self._collision[scene]

    def meta(self, scene: int, frame: int) -> Tuple[np.ndarray, np.ndarray]:
        """(N, 3, 4) float32 poses and (N,) 0-based object ids in cls_indexes order."""
        if self.gc6d:
            with open(os.path.join(self.root, 'scenes', f'{scene:06d}', 'scene_gt.json')) as f:
                instances = json.load(f)[str(4 * frame + 2)]
            poses = np.array([np.concatenate([np.reshape(i['cam_R_m2c'], (3, 3)),
                                              np.reshape(i['cam_t_m2c'], (3, 1)) / 1000.0], 1)
                              for i in instances], np.float32)
            return poses, np.array([i['obj_id'] - 1 for i in instances], np.int64)
        path = os.path.join(self.root, 'scenes', f'scene_{scene:04d}', self.camera, 'meta',
                            f'{frame:04d}.mat')
        mat = scipy.io.loadmat(path)
        ids = np.asarray(mat['cls_indexes']).reshape(-1).astype(np.int64) - 1
        poses = np.asarray(mat['poses'], dtype=np.float32).reshape(3, 4, len(ids))
        return poses.transpose(2, 0, 1), ids

    def frame_objects(self, scene: int, frame: int, labelled: Sequence[Tuple[np.ndarray,
                                                                            np.ndarray, int]],
                      collision: str = 'zero_scores',
                      aug_matrix: Optional[np.ndarray] = None) -> List[RawObject]:
        """The raw labels of each labelled object, given as (model points, model -> camera pose
        before augmentation, object id) in the batch's object order."""
        poses, ids = self.meta(scene, frame)
        masks = self.collision(scene)
        objects = []
        for points, pose, obj in labelled:
            found = [i for i in range(len(ids)) if np.array_equal(poses[i], pose)]
            assert len(found) == 1, f'scene {scene} frame {frame}: pose of object {obj} is ' \
                                    f'{len(found)} instances of the meta file'
            i = found[0]
            assert ids[i] == obj, (ids[i], obj)
            label = self.label(obj)
            rows = np.array([label['row_of'][p.tobytes()] for p in
                             np.ascontiguousarray(points, dtype=np.float32)])
            collided = masks[i][rows]
            scores = label['scores'][rows].copy()
            tolerance = None if label['tolerance'] is None else label['tolerance'][rows].copy()
            if collision != 'none':  # the loaders: scores[collision] = 0 (BL/SBG: tolerance too)
                scores[collided] = 0
                if tolerance is not None:
                    tolerance[collided] = 0
            camera_pose = pose.astype(np.float64)
            if aug_matrix is not None:
                camera_pose = aug_matrix.astype(np.float64) @ camera_pose
            objects.append(RawObject(i, obj, rows, camera_pose, points.astype(np.float64),
                                     scores, label['widths'][rows], tolerance, collided))
        return objects


# ------------------------------------------------------------------------------ matching (§4)
def _view_reindex(rotation: np.ndarray, views: np.ndarray) -> np.ndarray:
    """For each template slot v, the object view j whose rotated direction R·v_j is nearest."""
    rotated = views @ rotation.T
    d = ((views[:, None, :] - rotated[None, :, :]) ** 2).sum(-1)
    return d.argmin(1)


def reference_labels(method: str, seeds: np.ndarray, frames: List[List[RawObject]],
                     top_view: np.ndarray, scale_statistic: Optional[dict] = None,
                     min_views: int = 10, view_threshold: float = THRESH_BAD,
                     choice: Optional[Dict[Tuple[int, int], Tuple[int, int]]] = None,
                     tie_distance: float = 1e-6) -> dict:
    """MatchedLabels fields of ``method`` ('gsnet', 'bl', 'sbg') for seeds (B, Ns, 3).

    Objects are numbered over the batch, frame by frame (the batch's object order). The nearest
    label point of a seed is taken among its frame's points (1-NN, no cutoff); when several lie
    within ``tie_distance`` of the nearest, ``ties[(b, s)]`` lists them and ``choice`` may pick
    one of them for that seed (float32 against float64 distances may order true ties either way).
    """
    seeds = seeds.astype(np.float64)
    B, Ns, _ = seeds.shape
    V, A, D = frames[0][0].scores.shape[1:]
    views = fibonacci_views(V)
    template = viewpoint_to_matrix(-views, np.zeros(V))
    out = {k: [] for k in ('point', 'distance', 'object_index', 'row', 'view_index',
                           'view_rot', 'scores', 'widths', 'tolerance')}
    ties = {}
    first = 0
    slot_rot = []
    for b, objects in enumerate(frames):
        camera = np.concatenate([o.points @ o.pose[:, :3].T + o.pose[:, 3] for o in objects])
        owner = np.concatenate([np.full(len(o.points), k) for k, o in enumerate(objects)])
        row = np.concatenate([np.arange(len(o.points)) for o in objects])
        object_view = [_view_reindex(o.pose[:, :3], views) for o in objects]
        rotations = [o.pose[:, :3] @ template[j] for o, j in zip(objects, object_view)]
        slot_rot += rotations
        d = np.sqrt(((seeds[b][:, None] - camera[None]) ** 2).sum(-1))
        nearest = d.argmin(1)
        for s in range(Ns):
            near = np.flatnonzero(d[s] <= d[s, nearest[s]] + tie_distance)
            if len(near) > 1:
                ties[(b, s)] = [(first + int(owner[n]), int(row[n])) for n in near]
                if choice and (b, s) in choice:
                    pick = [n for n in near if (first + owner[n], row[n]) == choice[(b, s)]]
                    nearest[s] = pick[0]
        for s, n in enumerate(nearest):
            o, r = objects[owner[n]], row[n]
            j = object_view[owner[n]]
            out['point'].append(camera[n])
            out['distance'].append(d[s, n])
            out['object_index'].append(first + owner[n])
            out['row'].append(r)
            out['view_index'].append(j)
            out['view_rot'].append(rotations[owner[n]])
            out['scores'].append(o.scores[r][j])
            out['widths'].append(o.widths[r][j])
            out['tolerance'].append(None if o.tolerance is None else o.tolerance[r][j])
        first += len(objects)
    shape = (B, Ns)
    ref = {k: np.stack(v).reshape(*shape, *np.shape(v[0])) for k, v in out.items()
           if k != 'tolerance'}
    tolerance = None if out['tolerance'][0] is None else \
        np.stack(out['tolerance']).reshape(B, Ns, V, A, D)
    ref['valid'] = np.ones(shape, bool)
    ref['slot_rot'] = np.stack(slot_rot)
    ref.update(dict.fromkeys(('view_graspness', 'score_labels', 'view_labels', 'score_max',
                              'scale_weight', 'best_width', 'robust_graspable', 'collision')))
    mu, widths = ref['scores'], ref['widths']  # float32
    top = top_view[..., None]
    at_view = lambda grid: np.take_along_axis(  # noqa: E731
        grid, top.reshape(B, Ns, 1, *([1] * (grid.ndim - 3))), axis=2)[:, :, 0]
    ref['top_view'] = top_view
    ref['top_view_rot'] = at_view(ref['view_rot'])
    ref['top_widths'] = at_view(widths)
    if method == 'gsnet':
        # view graspness before the width mask: count of 0 < μ ≤ 0.6 over A·D, min-max over V
        count = ((mu > 0) & (mu <= VIEW_MU_THRESHOLD)).sum((-2, -1)) / (A * D)
        low, high = count.min(-1, keepdims=True), count.max(-1, keepdims=True)
        ref['view_graspness'] = (count - low) / (high - low + 1e-5)
        ref['widths'] = None  # GSNet reads widths at the chosen view only
        masked = np.where((mu > 0) & (widths <= GRASP_MAX_WIDTH), mu, 0).astype(np.float64)
        top_mu = at_view(masked)
        positive = top_mu > 0
        top_scores = top_mu.copy()
        if positive.any():  # graspness_implementation normalises only when positives exist
            u_max, u_min = top_mu.max(), top_mu[positive].min()
            top_scores[positive] = np.log(u_max / top_mu[positive]) / (np.log(u_max / u_min)
                                                                       + 1e-6)
        ref['top_scores'] = top_scores
        ref['top_tolerance'] = None
        return dict(ref, ties=ties)
    # BL / SBG: ln(u_max / μ) where μ > 0 and width ≤ 0.1, u_max over the whole batch tensor
    mask = (mu > 0) & (widths <= GRASP_MAX_WIDTH)
    u_max = mu.astype(np.float64).max()
    labels = np.zeros(mu.shape)
    labels[mask] = np.log(u_max / mu[mask].astype(np.float64))
    ref['score_labels'] = labels
    ref['score_max'] = u_max
    ref['view_labels'] = labels.reshape(B, Ns, V, A * D).max(-1)
    ref['top_scores'] = at_view(labels)
    ref['top_tolerance'] = at_view(tolerance)
    if method == 'sbg':
        counts = np.asarray(scale_statistic['num'], dtype=np.float64)
        edges = np.asarray(scale_statistic['interval'], dtype=np.float64)
        bin_weight = 1 - np.log(counts / counts.max())
        best = labels.reshape(B, Ns, -1).argmax(-1)
        width = np.take_along_axis(widths.reshape(B, Ns, -1), best[..., None], 2)[..., 0]
        index = np.zeros(shape, np.int64)  # outside every bin: bin 0, as SBG's id_mask
        for k in range(len(edges) - 1):
            index[(edges[k] < width) & (edges[k + 1] > width)] = k
        ref['scale_weight'] = bin_weight[index]
        ref['best_width'] = width
        ref['robust_graspable'] = (ref['view_labels'] > view_threshold).sum(-1) > min_views
    return dict(ref, ties=ties)


# ------------------------------------------------------------------------------ losses (§5)
def smooth_l1(error: np.ndarray) -> np.ndarray:
    """torch's SmoothL1Loss with β = 1 (GSNet's criterion)."""
    a = np.abs(error)
    return np.where(a < 1, 0.5 * a ** 2, a - 0.5)


def huber(error: np.ndarray, delta: float = 1.0) -> np.ndarray:
    """BL's huber_loss: 0.5·min(|e|, δ)² + δ·(|e| − min(|e|, δ))."""
    a = np.abs(error)
    q = np.minimum(a, delta)
    return 0.5 * q ** 2 + delta * (a - q)


def cross_entropy(logits: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-element cross-entropy, classes on axis 1 (torch's layout)."""
    shifted = logits - logits.max(1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    return -np.take_along_axis(log_prob, target[:, None], 1)[:, 0]


def gsnet_losses(pred: dict, labels: dict, objectness_label: np.ndarray,
                 graspness_label: np.ndarray, weights: dict) -> dict:
    """graspness_implementation models/loss.py: obj + 10·graspness + 100·view + 15·score
    + 10·width (weights from the config); a mean over an empty mask counts 0."""
    on_object = objectness_label.astype(bool)
    graspness = smooth_l1(pred['graspness'] - graspness_label)
    score_label = labels['top_scores']
    width = smooth_l1(pred['width'] - 10 * labels['top_widths'])
    positive = score_label > 0
    terms = dict(
        objectness=cross_entropy(pred['objectness'], objectness_label).mean(),
        graspness=graspness[on_object].mean() if on_object.any() else 0.0,
        view=smooth_l1(pred['view'] - labels['view_graspness']).mean(),
        score=smooth_l1(pred['score'] - score_label).mean(),
        width=width[positive].mean() if positive.any() else 0.0)
    return {k: weights[k] * v for k, v in terms.items()}


def bl_losses(pred: dict, labels: dict, seed_objectness: np.ndarray, weights: dict,
              sbg: bool = False) -> dict:
    """graspnet-baseline models/loss.py, or Scale-Balanced-Grasp's weighted variant
    (robust-graspable objectness and view mask, masks × scale weight, score mask widened to
    every depth). Predictions in BL's layout: view (B, Ns, V), score/angle/width/tolerance
    (B, A, Ns, D)."""
    on_object = seed_objectness > 0
    view_error = (pred['view'] - labels['view_labels']) ** 2
    if sbg:
        graspable = (labels['robust_graspable'] & on_object).astype(np.int64)
        objectness = cross_entropy(pred['objectness'], graspable).mean()
        weight = labels['scale_weight']
        view_mask = np.broadcast_to((graspable * weight)[..., None], view_error.shape)
        view = (view_error * view_mask).sum() / (view_mask.sum() + 1e-6)
    else:
        objectness = cross_entropy(pred['objectness'], seed_objectness).mean()
        view = view_error[on_object].mean() if on_object.any() else 0.0
    label = labels['top_scores']  # (B, Ns, A, D)
    best = label.argmax(2)  # (B, Ns, D)
    pick = lambda grid: np.take_along_axis(grid, best[:, :, None], 2)[:, :, 0]  # noqa: E731
    target, target_width = pick(label), pick(labels['top_widths'])
    target_tolerance = pick(labels['top_tolerance'])
    loss_mask = (on_object[..., None] & (target > THRESH_BAD)).astype(np.float64)
    if sbg:
        loss_mask = loss_mask * weight[..., None]
        score_mask = np.broadcast_to(loss_mask.max(2, keepdims=True), loss_mask.shape)
    else:
        score_mask = loss_mask
    at_best = lambda p: np.take_along_axis(  # noqa: E731
        p.transpose(0, 2, 1, 3), best[:, :, None], 2)[:, :, 0]  # (B, A, Ns, D) -> (B, Ns, D)
    mean = lambda x, m: (x * m).sum() / (m.sum() + 1e-6)  # noqa: E731
    B, A, Ns, D = pred['angle'].shape
    angle_ce = cross_entropy(pred['angle'].transpose(0, 2, 3, 1).reshape(-1, A)[..., None],
                             best.reshape(-1, 1)).reshape(B, Ns, D)
    terms = dict(
        objectness=objectness, view=view,
        score=mean(huber(at_best(pred['score']) - target), score_mask),
        angle=mean(angle_ce, loss_mask),
        width=mean(huber((at_best(pred['width']) - target_width) / 0.1), loss_mask),
        tolerance=mean(huber((at_best(pred['tolerance']) - target_tolerance)
                             / GRASP_MAX_TOLERANCE), loss_mask))
    return {k: weights[k] * v for k, v in terms.items()}
