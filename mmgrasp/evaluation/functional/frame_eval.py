"""One frame of GraspNet-1Billion's evaluation: graspnetAPI's ``eval_grasp`` and the accuracy
step of ``eval_scene``, as array operations."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from mmgrasp.geometry.collision import gripper_contacts
from mmgrasp.geometry.contacts import close_jaws
from mmgrasp.geometry.gripper import GRASPNET_GRIPPER, Gripper
from mmgrasp.geometry.force_closure import (GRASPNET_FRICTION_COEFFICIENTS,
                                            force_closure_min_friction)
from mmgrasp.geometry.points import PosedTable, nearest_indices, transform_points
from mmgrasp.geometry.sdf import SignedDistanceField, SignedDistanceFields

from mmgrasp.geometry.nms import grasp_nms
from mmgrasp.geometry.sorting import legacy_numpy_argsort

EVAL_FRICTION_COEFFICIENTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)
CUT_RANK = 50  # eval_grasp keeps the grasps scoring at least the 50th best (remain_mask[49])


def dexnet_grasp_params(grasps: np.ndarray, pose: np.ndarray):
    """Jaw centres, unit jaw axes and widths in the object frame (graspnetAPI's conversion).

    The centre is the grasp translation moved ``depth`` along the approach axis; the axis is
    the rotation's second column brought into the object frame. Raises ValueError naming the
    rows whose axis is not unit to 1e-5 (dexnet's "Illegal grasp axis").
    """
    rot = grasps[:, 4:13].reshape(-1, 3, 3)
    centre = rot[:, :, 0] * grasps[:, 3][:, None] + grasps[:, 13:16]
    centre = transform_points(centre, np.linalg.inv(pose))
    binormal = np.einsum('ji,gjk->gik', pose[:3, :3], rot)[:, :, 1]
    norm = np.linalg.norm(binormal, axis=1)
    bad = np.flatnonzero(np.abs(norm - 1.0) > 1e-5)
    if len(bad):
        raise ValueError(f'grasp rows {bad.tolist()[:10]}: rotation is not orthonormal (jaw axis '
                         f'norm {norm[bad[0]]:.7f}); dexnet would refuse them as well')
    return centre, binormal / norm[:, None], grasps[:, 1].copy()


def grasp_friction(grasps: np.ndarray, pose: np.ndarray, sdf: SignedDistanceField,
                   coefficients: Sequence[float] = GRASPNET_FRICTION_COEFFICIENTS) -> np.ndarray:
    """(G,) smallest force-closure coefficient of each grasp on one object, -1 if none."""
    return grasps_friction([(grasps, pose, sdf)], coefficients)[0]


def grasps_friction(groups: Sequence[tuple],
                    coefficients: Sequence[float] = GRASPNET_FRICTION_COEFFICIENTS
                    ) -> List[np.ndarray]:
    """:func:`grasp_friction` of many ``(grasps, pose, sdf)`` groups (objects of many frames)
    in one pass: the jaws of every grasp close together on the groups' fields side by side
    (:class:`SignedDistanceFields`), each grasp as on its own field alone. Returns one (G,)
    array per group."""
    sizes = [len(g) for g, _, _ in groups]
    if not sum(sizes):
        return [np.zeros(n) for n in sizes]
    index: Dict[int, int] = {}  # the same field object in several groups is stacked once
    fields = [index.setdefault(id(sdf), len(index)) for _, _, sdf in groups]
    unique = {id(sdf): sdf for _, _, sdf in groups}
    stack = SignedDistanceFields([unique[k] for k in index])
    params = [dexnet_grasp_params(g, pose) for g, pose, _ in groups if len(g)]
    centres, axes, widths = (np.concatenate(p) for p in zip(*params))
    field = np.repeat(np.array(fields, np.int64), sizes)
    found, points, normals = close_jaws(stack, centres, axes, widths, field=field)
    score = force_closure_min_friction(points[:, 0], normals[:, 0], points[:, 1],
                                       normals[:, 1], coefficients)
    score[~found] = -1.0
    return np.split(score, np.cumsum(sizes)[:-1])


def precision_at_k(scores: np.ndarray, top_k: int = 50,
                   coefficients: Sequence[float] = EVAL_FRICTION_COEFFICIENTS) -> np.ndarray:
    """(top_k, C) accuracy: among the first k+1 grasps (sorted by confidence), the share with
    0 < score <= mu; fewer grasps than k+1 count as failures."""
    scores = np.asarray(scores, dtype=np.float64)[:top_k]
    mus = np.asarray(coefficients, dtype=np.float64)
    good = (scores[:, None] <= mus[None, :]) & (scores[:, None] > 0)
    hits = np.zeros((top_k, len(mus)))
    hits[:len(scores)] = np.cumsum(good, axis=0)
    hits[len(scores):] = hits[len(scores) - 1] if len(scores) else 0
    return hits / np.arange(1, top_k + 1)[:, None]


def evaluate_frame(grasps: np.ndarray, models: Sequence[np.ndarray],
                   sdfs: Sequence[SignedDistanceField], poses: Sequence[np.ndarray],
                   table: PosedTable | None, top_k: int = 50, max_width: float = 0.1,
                   per_object: int = 10,
                   width_range: Optional[Tuple[float, float]] = None,
                   gripper: Gripper = GRASPNET_GRIPPER) -> dict:
    """graspnetAPI's per-frame evaluation of a dump (tied scores ordered as graspnetAPI's
    sorts order them, see :mod:`mmgrasp.geometry.sorting`).

    Args:
        grasps: (N, 17) dumped rows (any float dtype; widths are clipped in that dtype).
        models: downsampled model points per object, object frame.
        sdfs: the objects' SDFs, same order. poses: float32 4x4 object -> camera.
        table: the table points posed in the camera frame, or None.
        top_k: rows of the precision array (graspnetAPI 50, Scale-Balanced-Grasp's size split
            20); the score cut stays at rank 50 whatever it is (``eval_grasp`` hard-codes it).
        per_object: best grasps kept per object (graspnetAPI 10, Scale-Balanced-Grasp 5).
        width_range: keep only grasps with ``lo <= width < hi`` after clipping (the size
            split); None keeps all.
        gripper: whose fingers and palm the collision test places (``max_width`` is passed
            apart: the protocol sets it, to the gripper's by default).

    Returns:
        dict(accuracy=(top_k, 6), grasps=kept rows sorted by confidence, scores=their
        friction coefficient or -1, collision=their collision-or-empty mask, and the parts
        the diagnostics report from the same run: hit (a finger or the palm in a point),
        empty (fewer than 10 points between the fingers), object (index into ``models``)
        per kept grasp, and the counts dumped / in_width / after_nms.)
    """
    return evaluate_frames([(grasps, models, sdfs, poses, table)], top_k, max_width,
                           per_object, width_range, gripper)[0]


def evaluate_frames(frames: Sequence[tuple], top_k: int = 50, max_width: float = 0.1,
                    per_object: int = 10, width_range: Optional[Tuple[float, float]] = None,
                    gripper: Gripper = GRASPNET_GRIPPER,
                    on_frame: Optional[Callable[[int], None]] = None) -> List[dict]:
    """:func:`evaluate_frame` of several frames, each ``(grasps, models, sdfs, poses, table)``:
    every frame's grasps are selected and checked for collision in turn (``on_frame(n)``
    before frame ``n``), then the force-closure test runs once for the surviving grasps of
    every object of every frame (:func:`grasps_friction`). The results are those of
    :func:`evaluate_frame` frame by frame."""
    selected = []
    for n, frame in enumerate(frames):
        if on_frame is not None:
            on_frame(n)
        selected.append(_select(*frame, top_k, max_width, per_object, width_range, gripper))
    groups = [(g[free], frames[n][3][i], frames[n][2][i])
              for n, (_, checked) in enumerate(selected)
              for i, g, _, _, free in checked if free.any()]
    friction = iter(grasps_friction(groups))
    results = []
    for out, checked in selected:
        if checked:
            scores = []
            for _, g, hit, empty, free in checked:
                score = np.full(len(g), -1.0)
                if free.any():
                    score[free] = next(friction)
                scores.append(score)
            _finish(out, checked, scores, top_k)
        results.append(out)
    return results


def _select(grasps, models, sdfs, poses, table, top_k, max_width, per_object, width_range,
            gripper) -> tuple:
    """One frame up to the force-closure test: (the result so far, [(object, its kept
    grasps, hit, empty, free)]); the list is empty where nothing reaches the test."""
    grasps = np.array(grasps).reshape(-1, 17)
    counts = dict(dumped=len(grasps), in_width=0, after_nms=0)
    out = dict(accuracy=np.zeros((top_k, len(EVAL_FRICTION_COEFFICIENTS))),
               grasps=np.zeros((0, 17)), scores=np.zeros(0), collision=np.zeros(0, bool),
               hit=np.zeros(0, bool), empty=np.zeros(0, bool),
               object=np.zeros(0, np.int64), **counts)
    if len(grasps) == 0 or len(models) == 0:
        return out, []
    grasps[:, 1] = np.clip(grasps[:, 1], 0, max_width)
    if width_range is not None:
        grasps = grasps[(grasps[:, 1] >= width_range[0]) & (grasps[:, 1] < width_range[1])]
    out['in_width'] = len(grasps)
    if len(grasps) == 0:
        return out, []
    grasps = grasp_nms(grasps, 0.03, 30.0 / 180 * np.pi)
    out['after_nms'] = len(grasps)
    posed = [transform_points(m, p) for m, p in zip(models, poses)]
    owner = np.concatenate([np.full(len(m), i) for i, m in enumerate(posed)])
    scene = np.concatenate(posed, axis=0)
    assigned = owner[nearest_indices(grasps[:, 13:16], scene)]
    per_obj = []
    for i in range(len(posed)):
        g = grasps[assigned == i]
        per_obj.append(g[legacy_numpy_argsort(g[:, 0])[::-1]][:per_object])
    stacked = np.vstack(per_obj)
    if len(stacked) == 0:
        return out, []
    ranked = legacy_numpy_argsort(stacked[:, 0])[::-1]
    min_score = stacked[ranked[min(CUT_RANK - 1, len(ranked) - 1)], 0]
    per_obj = [g[g[:, 0] >= min_score] for g in per_obj]
    boxes = {i: (posed[i].min(axis=0) - 0.05, posed[i].max(axis=0) + 0.05)
             for i, g in enumerate(per_obj) if len(g)}
    if not boxes:  # NaN scores pass no threshold
        return out, []
    if table is not None:  # only the table points that the boxes of these objects can hold
        lo = np.min([b[0] for b in boxes.values()], axis=0)
        hi = np.max([b[1] for b in boxes.values()], axis=0)
        scene = np.concatenate([scene, table.inside(lo, hi)])
    checked = []
    for i, (lo, hi) in boxes.items():
        g = per_obj[i]
        hit, empty = gripper_contacts(g, scene, gripper.height, gripper.base_depth,
                                      gripper.finger_width, within=(lo, hi))
        checked.append((i, g, hit, empty, ~(hit | empty)))
    return out, checked


def _finish(out: dict, checked: list, scores: list, top_k: int) -> None:
    """The kept grasps of a frame sorted by confidence, their verdicts and the accuracy."""
    kept = np.concatenate([g for _, g, _, _, _ in checked])
    order = legacy_numpy_argsort(-kept[:, 0])
    out.update(grasps=kept[order], scores=np.concatenate(scores)[order],
               hit=np.concatenate([c[2] for c in checked])[order],
               empty=np.concatenate([c[3] for c in checked])[order],
               object=np.concatenate([np.full(len(g), i, np.int64)
                                      for i, g, _, _, _ in checked])[order])
    out['collision'] = out['hit'] | out['empty']
    out['accuracy'] = precision_at_k(out['scores'], top_k)
