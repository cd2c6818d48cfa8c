"""The visible-label rule of GraspNet-baseline's recipe, split so that its per-label-point test
runs where the batch is (the data preprocessor's device) instead of in a loader worker.

Rule (``SampleGraspLabels(visible_only=True)``): a label point of an object is a candidate when
its nearest sampled scene point of that object, before augmentation, is closer than
``distance`` (float64 arithmetic of float32 points, as scipy's cKDTree, compared as squared
distances against :func:`squared_threshold`); of the n candidates
``max(⌊n·fraction⌋, min_points)`` (all when fewer) are drawn without replacement by a generator
seeded with the sample's ``seed``, object after object, and kept in row order.

The worker path tests with a cKDTree and draws at once; the device path ships a
:class:`PendingVisibility` (one flat buffer of label points and one of scene points per sample)
and :func:`resolve_visibility` tests a whole batch on a CUDA device (on the CPU with the
worker's cKDTree, in the main process), reads the masks to the host in one transfer and draws
with :func:`draw_rows`: the same rows bit for bit.
"""
import dataclasses
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor

from mmgrasp.ops.point_ops import nearest_squared_distance
from .grasp_labels import ObjectGraspLabels

_FAR = 1e30  # padding of the scene points: never the nearest one


@dataclass
class PendingVisibility:
    """What a worker ships instead of testing: for its sample's labelled objects (in
    ``grasp_labels`` order, each carrying ALL its label points and rows), the label points in
    the camera frame and the object's sampled scene points, each as one flat float32 buffer.

    Attributes:
        label_points: (L, 3) float32, camera frame, object after object.
        label_counts: (O,) int64 numpy, label points per object (its ``num_points``); sizes
            stay numpy so that reading them is no device read.
        scene_points: (S, 3) float32, the object's sampled points, object after object.
        scene_counts: (O,) int64 numpy.
        seed: seed of the draw's generator.
        distance: metres.
        fraction, min_points: how many candidates are kept.
    """
    label_points: Tensor
    label_counts: np.ndarray
    scene_points: Tensor
    scene_counts: np.ndarray
    seed: int
    distance: float
    fraction: float
    min_points: int


def draw_rows(visible: Sequence[np.ndarray], seed: int, fraction: float,
              min_points: int) -> List[np.ndarray]:
    """The kept rows (sorted int64) of each object, from its (n,) bool candidate mask."""
    rng = np.random.default_rng(seed)
    rows = []
    for mask in visible:
        candidates = np.flatnonzero(mask)
        keep = min(max(int(len(candidates) * fraction), min_points), len(candidates))
        rows.append(np.sort(rng.choice(candidates, keep, replace=False)))
    return rows


def squared_threshold(distance: float) -> float:
    """The least float64 ``t`` with ``np.sqrt(t) >= distance``: ``d2 < t`` is exactly
    ``np.sqrt(d2) < distance`` (numpy's square root is correctly rounded, so monotonic), the
    worker's comparison, with no square root on the device."""
    t = np.float64(distance) * np.float64(distance)
    while np.sqrt(t) >= distance:
        t = np.nextafter(t, -np.inf)
    while np.sqrt(t) < distance:
        t = np.nextafter(t, np.inf)
    return float(t)


def _padded(points: Tensor, counts: List[int], fill: float) -> Tensor:
    """(sum counts, 3) -> (len(counts), max count, 3), rows past each count set to ``fill``
    (the places written are indexed from the host's counts: no read of a device tensor)."""
    width = max(counts, default=0)
    out = points.new_full((len(counts) * width, 3), fill)
    places = np.concatenate([np.arange(c) + i * width for i, c in enumerate(counts)])
    out[torch.from_numpy(places).to(points.device)] = points
    return out.view(len(counts), width, 3)


def visible_masks(records: Sequence[PendingVisibility], device,
                  kd_tree: Optional[bool] = None) -> List[List[np.ndarray]]:
    """Per record, per object, the (n,) bool candidate mask. On a CUDA device (``kd_tree``
    False): one padded test of every object of the batch there (float64), one read of the
    masks on the host. On the CPU (``kd_tree`` None or True): the worker's cKDTree per object,
    here, as a brute-force pass would cost the host far more; the same masks bit for bit."""
    if kd_tree is None:
        kd_tree = torch.device(device).type == 'cpu'
    label_counts = [c for r in records for c in r.label_counts.tolist()]
    scene_counts = [c for r in records for c in r.scene_counts.tolist()]
    if not label_counts:
        return [[] for _ in records]
    distances = [r.distance for r in records for _ in range(len(r.label_counts))]
    if kd_tree:
        labels = [q for r in records
                  for q in torch.split(r.label_points, r.label_counts.tolist())]
        scene = [p for r in records for p in torch.split(r.scene_points, r.scene_counts.tolist())]
        flat = [cKDTree(s.numpy()).query(q.numpy(), k=1)[0] < d
                for q, s, d in zip(labels, scene, distances)]
    else:
        labels = torch.cat([r.label_points for r in records]).to(device, torch.float64)
        scene = torch.cat([r.scene_points for r in records]).to(device, torch.float64)
        limits = torch.tensor([squared_threshold(d) for d in distances], dtype=torch.float64)
        dist2 = nearest_squared_distance(_padded(scene, scene_counts, _FAR),
                                         _padded(labels, label_counts, 0.0))
        flat = (dist2 < limits.to(device)[:, None]).cpu().numpy()  # the one read on the host
    masks, k = [], 0
    for r in records:
        masks.append([flat[k + i][:n] for i, n in enumerate(r.label_counts.tolist())])
        k += len(r.label_counts)
    return masks


def apply_rows(labels: ObjectGraspLabels, rows: np.ndarray) -> ObjectGraspLabels:
    """Keep label points ``rows`` (of those the deferred labels carry) and their grid rows."""
    record = labels.deferred
    return dataclasses.replace(
        labels, points=labels.points[torch.from_numpy(rows)],
        deferred=dataclasses.replace(record, rows=np.ascontiguousarray(record.rows[rows])))


def resolve_visibility(frames: Sequence[List[ObjectGraspLabels]],
                       records: Sequence[PendingVisibility], device='cpu',
                       kd_tree: Optional[bool] = None) -> List[List[ObjectGraspLabels]]:
    """The labels of each frame reduced to the rows the rule keeps (see the module;
    ``kd_tree`` as :func:`visible_masks`)."""
    resolved = []
    for labels, record, masks in zip(frames, records, visible_masks(records, device, kd_tree)):
        if len(labels) != len(masks):
            raise ValueError(f'resolve_visibility: {len(labels)} grasp_labels but a pending '
                             f'visibility test of {len(masks)} objects')
        rows = draw_rows(masks, record.seed, record.fraction, record.min_points)
        resolved.append([apply_rows(o, r) for o, r in zip(labels, rows)])
    return resolved


def resolved_grasp_labels(sample) -> List[ObjectGraspLabels]:
    """A packed sample's grasp labels with a pending visibility test applied (on the CPU):
    for code that reads labels outside the model (statistics, inspection)."""
    record = sample.get('grasp_label_visibility')
    if record is None:
        return sample.grasp_labels
    return resolve_visibility([sample.grasp_labels], [record])[0]
