"""GraspNet-1Billion grasp labels of one object from its signed distance field, with the
evaluator's own physics (:mod:`mmgrasp.geometry`).

A cell (label point p, view v, angle a, depth d) is the grasp whose frame is the template
rotation of (v, a) (x = approach = -view, y = closing axis), whose translation is p and whose
jaws close along y through the centre c = p + d * x, as graspnetAPI converts a grasp for dexnet.
For every cell:

1. **centre**: c must lie inside the object (SDF(c) < 0), as in the synthetic writer's labels;
   otherwise the gripper reaches past the object and the cell is infeasible (μ = -1).
2. **width**: from c the jaw line is traced outwards both ways to the surface on the SDF
   (:func:`exit_distance`: sphere tracing, then bisection); the width is twice the longer half
   plus ``2 * clearance`` (both jaws start ``clearance`` outside the surface, as the synthetic
   writer's labels), infeasible when it exceeds the gripper's maximum width.
3. **friction**: the jaws close from that width on the SDF exactly as the evaluator closes
   them (:func:`mmgrasp.geometry.close_jaws`, dexnet's ``close_fingers``; the width as stored,
   float32), and the label is the smallest μ of 0.1, 0.2, ..., 1.0 at which the antipodal test
   holds (:func:`mmgrasp.geometry.force_closure_min_friction`), -1 where the contacts are not
   found or no μ holds. So the evaluator judges each label grasp force-closure at its μ and not
   at the next lower one.
4. **self-collision** (cells with μ > 0): the evaluator's point test of the gripper's fingers
   and base against the object's model points (``points_collision``).

Cells are processed in chunks of at most ``max_cells`` (memory stays bounded); the label arrays
of the object are the only thing that grows with its size.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from mmgrasp.geometry import (GRASPNET_GRIPPER, Gripper, SignedDistanceField, close_jaws,
                              force_closure_min_friction)
from ..synthetic.labels import JAW_CLEARANCE, MU_GRID, grasp_frames, points_collision
from .jaw_line import SUBSTEPS, field_lipschitz, jaw_axes

#: transient bytes per grasp cell while its jaws close (measured peak / cells, rounded up)
BYTES_PER_CELL = 6000


def _step_bound(sdf: SignedDistanceField, lipschitz: tuple, grid: np.ndarray, axes: np.ndarray,
                step: np.ndarray) -> np.ndarray:
    """How fast the field can change along ``axes`` over steps from ``grid`` (inside the grid):
    the start's neighbourhood bound for steps up to a cell (they stay in it), else the grid's."""
    near, worst = lipschitz
    cell = np.clip(np.floor(grid).astype(np.int64), 0, np.array(near.shape[1:]) - 1)
    local = near[:, cell[:, 0], cell[:, 1], cell[:, 2]].T
    a = np.abs(axes)
    rate = [a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2] for b in (local, worst[None])]
    return np.where(step <= sdf.resolution, *rate)




def exit_distance(sdf: SignedDistanceField, starts: np.ndarray, axes: np.ndarray,
                  limit: float, bisections: int = 12,
                  lipschitz: Optional[tuple] = None) -> np.ndarray:
    """Distance t > 0 at which ``starts + t * axes`` (inside the object) first reaches the
    surface of ``sdf``, NaN beyond ``limit``.

    Sphere tracing (steps of 0.9 |SDF|, at least a fifth of a cell), each step checked as it
    is taken: the segment stays inside when the balls |SDF| / L around its two ends cover it
    (L: the bound of :func:`field_lipschitz` along the line, its start's neighbourhood's for
    steps up to a cell, the grid's for longer ones); where they leave a gap, the step is
    sampled at its ``SUBSTEPS`` points in the gap, and the first sample outside ends the
    trace. So the trace does not pass a sliver of the outside thinner than a step (as plain
    sphere tracing's shortest steps do where the jaw line grazes the surface): only one
    thinner than a sixteenth of a step, in a gap the balls leave, can still be crossed. The
    last step, whose end is outside, is then halved ``bisections`` times (12: below a
    micrometre for 2 mm cells). ``lipschitz``: :func:`field_lipschitz` of ``sdf`` (computed
    when None)."""
    lipschitz = field_lipschitz(sdf) if lipschitz is None else lipschitz
    k = len(starts)
    t = np.zeros(k)
    value = sdf(sdf.to_grid(starts))
    lo, hi = np.zeros(k), np.full(k, np.nan)
    active = value < 0
    hi[~active] = 0.0  # a start on or outside the surface: no step
    min_step = 0.2 * sdf.resolution
    frac = np.arange(1, SUBSTEPS) / SUBSTEPS
    while active.any():
        idx = np.flatnonzero(active)
        v0, t0 = value[idx], t[idx]
        step = np.maximum(0.9 * -v0, min_step)
        t1 = t0 + step
        v1 = sdf(sdf.to_grid(starts[idx] + t1[:, None] * axes[idx]))
        bound = _step_bound(sdf, lipschitz, sdf.to_grid(starts[idx] + t0[:, None] * axes[idx]),
                            axes[idx], step)
        check = np.flatnonzero((-v0 - v1) < bound * step)  # not certified: sample the step
        if len(check):
            ts = t0[check, None] + step[check, None] * frac  # (m, SUBSTEPS - 1)
            j = idx[check]
            with np.errstate(divide='ignore'):  # a zero bound: a constant field
                reach0, reach1 = -v0[check] / bound[check], -v1[check] / bound[check]
            gap = ~(ts - t0[check, None] < reach0[:, None]) & \
                ~(t1[check, None] - ts < reach1[:, None])  # samples neither ball covers
            sub = np.zeros(ts.shape, bool)
            sub[gap] = sdf(sdf.to_grid(starts[j, None] + ts[..., None] * axes[j, None])[gap]) >= 0
            crossed = np.flatnonzero(sub.any(1))
            first = np.argmax(sub[crossed], 1)
            v1[check[crossed]] = 0.0  # ends outside: bracketed below
            t1[check[crossed]] = ts[crossed, first]
            t0[check[crossed]] = np.where(first > 0, ts[crossed, np.maximum(first - 1, 0)],
                                          t0[check[crossed]])
        out = v1 >= 0
        lo[idx[out]], hi[idx[out]] = t0[out], t1[out]
        moved = idx[~out]
        t[moved], value[moved] = t1[~out], v1[~out]
        active[idx[out]] = False
        active[moved[t[moved] > limit]] = False
    hit = np.flatnonzero(np.isfinite(hi) & (hi > 0))
    lo_h, hi_h = lo[hit], hi[hit]
    s, u = starts[hit], axes[hit]
    for _ in range(bisections):
        mid = (lo_h + hi_h) / 2
        out = sdf(sdf.to_grid(s + mid[:, None] * u)) >= 0
        hi_h, lo_h = np.where(out, mid, hi_h), np.where(out, lo_h, mid)
    hi[hit] = hi_h
    hi[hi > limit] = np.nan
    return hi


def label_grasps(points: np.ndarray, gripper: Gripper = GRASPNET_GRIPPER):
    """Rotations (V, A, 3, 3), centres (Np, V, D, 3) and depths (D,) of every cell, float64."""
    rot = grasp_frames(gripper.num_views, gripper.num_angles, gripper.angles())
    depths = gripper.depths()
    p = np.asarray(points, np.float32).astype(np.float64)
    centres = rot[None, :, None, 0, :, 0] * depths[:, None] + p[:, None, None, :]
    return rot, centres, depths


def object_grasp_labels(sdf: SignedDistanceField, points: np.ndarray,
                        model_points: np.ndarray, gripper: Gripper = GRASPNET_GRIPPER,
                        clearance: float = JAW_CLEARANCE, max_cells: int = 200_000,
                        progress: Optional[Callable[[int, int], None]] = None,
                        backend: str = 'numpy', device: Optional[str] = None) -> dict:
    """The ``grasp_label/%03d_labels.npz`` arrays of one object.

    Args:
        sdf: the object's SDF (the one written to ``textured.sdf``).
        points: (Np, 3) label points, model frame.
        model_points: the model points the evaluator tests the gripper against (8 mm voxels of
            the surface), for self-collision.
        gripper: dimensions and grid.
        clearance: how far outside the surface each jaw starts, metres.
        max_cells: cells whose jaws close at once (memory: about ``BYTES_PER_CELL`` each).
        progress: called with (points done, points) after each chunk.
        backend: ``'numpy'`` (this module: the evaluator's own functions, the reference) or
            ``'torch'`` (:mod:`.batched`: the same physics batched in torch, on ``device``).
        device: the torch device of the ``'torch'`` backend (None: CUDA when present).

    Returns:
        dict(points (Np, 3) float32, offsets (Np, V, A, D, 3) float32 (angle, depth, width),
        collision (Np, V, A, D) bool, scores (Np, V, A, D) float32 μ or -1).
    """
    if backend == 'torch':
        from .batched import batched_object_grasp_labels
        return batched_object_grasp_labels(sdf, points, model_points, gripper, clearance,
                                           max_cells, progress, device)
    if backend != 'numpy':
        raise ValueError(f"label backend {backend!r}: expected 'numpy' or 'torch'")
    points = np.asarray(points, np.float32).reshape(-1, 3)
    v, a, d = gripper.grid
    lipschitz = field_lipschitz(sdf)
    rot, _, depths = label_grasps(points[:0], gripper)
    axes = jaw_axes(rot)  # (V, A, 3)
    shape = (len(points), v, a, d)
    mu = np.full(shape, -1, np.float32)
    width = np.zeros(shape, np.float32)
    per_point = max(v * a * d, 1)
    step = max(1, max_cells // per_point)
    for s in range(0, len(points), step):
        _, centres, _ = label_grasps(points[s:s + step], gripper)
        inside = sdf(sdf.to_grid(centres)) < 0  # (n, V, D)
        pi, vi, di = np.nonzero(inside)
        c = np.repeat(centres[pi, vi, di], a, axis=0)  # (M * A, 3), angles fastest
        u = axes[vi].reshape(-1, 3)
        limit = gripper.max_width / 2
        with np.errstate(invalid='ignore'):
            both = exit_distance(sdf, np.concatenate([c, c]), np.concatenate([u, -u]), limit,
                                 lipschitz=lipschitz)
            half = np.maximum(both[:len(c)], both[len(c):])
            w = (2 * half + 2 * clearance).astype(np.float32)
            ok = np.isfinite(half) & (w.astype(np.float64) <= gripper.max_width)
        cell_mu = np.full(len(c), -1.0)
        rows = np.flatnonzero(ok)
        found, q, n = close_jaws(sdf, c[rows], u[rows], w[rows].astype(np.float64))
        cell_mu[rows] = np.where(found, force_closure_min_friction(
            q[:, 0], n[:, 0], q[:, 1], n[:, 1], MU_GRID), -1.0)
        mu[pi + s, vi, :, di] = cell_mu.reshape(-1, a)
        width[pi + s, vi, :, di] = np.where(ok, w, 0).reshape(-1, a)
        if progress is not None:
            progress(min(s + step, len(points)), len(points))
    collision = points_collision(mu, width, points, gripper.grid, model_points,
                                 gripper=gripper)
    offsets = np.empty(shape + (3,), np.float32)
    offsets[..., 0] = gripper.angles().astype(np.float32)[:, None]
    offsets[..., 1] = depths.astype(np.float32)
    offsets[..., 2] = width
    return dict(points=points, offsets=offsets, collision=collision, scores=mu)
