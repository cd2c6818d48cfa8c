"""Grasp labels of box objects computed with the evaluator's physics (used by :mod:`.scene`).

GraspNet-1Billion labels a grasp by a surface point p, a view v (approach a = -v), an in-plane
angle and a depth d: the gripper frame is x = a, y = jaw axis, z = height (graspnet.md §2), and
the jaws close along y through the centre c = p + d * a (graspnetAPI's dexnet conversion). For a
box the evaluator's steps have closed forms, computed here for every cell at once:

- **contacts**: the two jaws moving from c -/+ w/2 * y towards c stop where the line
  c + t * y enters / leaves the box (slab intersection, t_near < 0 < t_far); c must lie inside the
  box. The contact normals are the normals of the faces hit (what dexnet's plane fit gives on the
  SDF written by ``boxes.box_sdf_grid`` away from edges); contacts closer than
  ``EDGE_MARGIN`` to an edge of their face are rejected, because there the SDF's fitted normal
  blends two faces.
- **width** w = 2 * max(-t_near, t_far) + 2 * ``JAW_CLEARANCE``: both jaws start outside the box.
- **friction** (dexnet's antipodal test, ``PointGraspMetrics3D.force_closure``): the grasp holds at
  μ when both contact normals lie within arctan(μ) of the line joining the contacts; the label is
  the smallest μ of ``MU_VALUES`` (0.1 ... 1.0) that holds, -1 when none does.
- **self-collision**: the two fingers and the base of graspnetAPI's gripper (height 0.02, base
  depth 0.02, finger width 0.01) against the solid box, by the separating-axis test (exact for
  boxes; the evaluator's points lie on or inside the box, so a grasp free here is free there).
- **scene collision**: self-collision, or the gripper's hull (fingers, base and the space between
  the fingers) against another box of the scene (same test), or any corner of the hull below the
  table top.

Collisions are computed where the grasp holds (μ > 0), the only cells any consumer reads them
(training zeroes μ where they are set, ground truth keeps μ > 0 and no collision); elsewhere the
flags are False. The statistics that follow, for boxes of 4-12 cm, are stated in :mod:`.graspnet`.

Curved and concave shapes (:mod:`.shapes`) follow the same rules from their exact signed
distance instead of closed forms (``shape_grasp_labels``): the jaw line is marched from the
centre outwards (1 mm steps, then bisection) to the surface; the cell is infeasible when the line
meets the surface again before the open jaw (a concave shape: the jaw would stop elsewhere) or
when the normals within ``EDGE_MARGIN`` of a contact turn by more than ``EDGE_ANGLE`` (an edge:
the SDF's fitted normal blends two faces). Their collisions are the evaluator's point test
(``gripper_collision``: points in the fingers or the base) against the model's and the other
objects' points downsampled at 8 mm, as the evaluator samples them, and the table test above.
"""
from __future__ import annotations

import numpy as np

from mmgrasp.geometry import GRASPNET_GRIPPER, Gripper, gripper_collision, portable_min_friction
from mmgrasp.geometry.portable import cos, dot, matmul, matvec, norm, rigid_inverse, sin

__all__ = ['grasp_views', 'grasp_frames', 'box_grasp_labels', 'box_self_collision',
           'scene_collision', 'shape_grasp_labels', 'points_collision', 'tolerance_labels',
           'march_exit', 'GRIPPER_HEIGHT', 'GRIPPER_BASE_DEPTH', 'FINGER_WIDTH', 'JAW_CLEARANCE',
           'EDGE_MARGIN', 'MU_GRID']

GRIPPER_HEIGHT = GRASPNET_GRIPPER.height  # graspnetAPI eval_utils.collision_detection
GRIPPER_BASE_DEPTH = GRASPNET_GRIPPER.base_depth
FINGER_WIDTH = GRASPNET_GRIPPER.finger_width
JAW_CLEARANCE = 0.005  # each open jaw starts this far outside the box
EDGE_MARGIN = 0.006  # three SDF cells (boxes.SDF_RESOLUTION = 2 mm)
CENTRE_MARGIN = 0.004  # two SDF cells: dexnet's jaw samples end at the centre
EDGE_ANGLE = np.deg2rad(45.0)  # curved shapes: normal turn within EDGE_MARGIN that marks an edge
MARCH_STEP = 0.001  # curved shapes: jaw-line march before bisection
MAX_WIDTH = 0.1  # graspnetAPI clips widths to 0.1 m before closing the jaws
#: Friction coefficients of the labels (the 0.1 grid) in float64, as the evaluator compares them.
MU_GRID = np.round(np.arange(1, 11) * 0.1, 1)
_TOLERANCE_RADII = [0.001 * x for x in range(51)]  # graspnet-baseline generate_tolerance_label.py


def grasp_views(num_views: int) -> np.ndarray:
    """Fibonacci lattice of ``num_views`` unit vectors (graspnetAPI ``generate_views``), float64."""
    phi = (np.sqrt(5) - 1) / 2
    i = np.arange(num_views, dtype=np.float64)
    z = (2 * i + 1) / num_views - 1
    r = np.sqrt(1 - z ** 2)
    return np.stack([r * cos(2 * i * np.pi * phi), r * sin(2 * i * np.pi * phi), z], 1)


def grasp_frames(num_views: int, num_angles: int, angles: np.ndarray | None = None
                 ) -> np.ndarray:
    """Rotations (V, A, 3, 3) of approach -view and angle a * pi / 12, or ``angles`` (A,)
    (columns x, y, z)."""
    x = -grasp_views(num_views)
    y = np.stack([-x[:, 1], x[:, 0], np.zeros(num_views)], 1)
    y[norm(y) == 0] = (0, 1, 0)
    y /= norm(y)[:, None]
    z = np.cross(x, y)
    theta = np.arange(num_angles) * np.pi / 12 if angles is None else np.asarray(angles)
    c, s = cos(theta)[None, :, None], sin(theta)[None, :, None]
    y_a = c * y[:, None] + s * z[:, None]
    z_a = -s * y[:, None] + c * z[:, None]
    x_a = np.broadcast_to(x[:, None], y_a.shape)
    return np.stack([x_a, y_a, z_a], axis=-1)


def _depths(num_depths: int) -> np.ndarray:
    return (np.arange(num_depths) + 1) * 0.01


def box_grasp_labels(half: np.ndarray, points: np.ndarray, grid: tuple[int, int, int],
                     max_width: float = MAX_WIDTH):
    """μ and widths of every cell of the label points of a box.

    Chords wider than ``max_width`` are infeasible. The default is the gripper's 0.1 m, which the
    evaluator enforces; a wider value keeps μ for wider grasps, as GraspNet-1Billion's own labels
    do (the training recipes mask widths above 0.1 m themselves).

    Returns ``(mu (Np,V,A,D) float32, -1 where the grasp fails; width (Np,V,A,D) float32, 0 where
    the jaw centre lies outside the box)``.
    """
    v, a, d = grid
    half = np.asarray(half, np.float64)
    rot = grasp_frames(v, a)  # (V, A, 3, 3)
    p = np.asarray(points, np.float64)
    centre = p[:, None, None, :] + _depths(d)[:, None] * rot[None, :, None, 0, :, 0]
    inside = np.all(np.abs(centre) < half, axis=-1)  # (Np, V, D): jaw centre strictly inside
    pi, vi, di = np.nonzero(inside)
    c = centre[pi, vi, di]  # (M, 3)
    axes = np.ascontiguousarray(rot[..., 1])  # (V, A, 3) jaw axes
    with np.errstate(divide='ignore'):
        inv_axes = [1.0 / axes[..., k] for k in range(3)]  # (V, A) each

    def slabs(cen, inv):
        """Per axis k: the line's parameters (lo, hi) at the box's two k-faces."""
        for k in range(3):
            t1 = (-half[k] - cen[..., k]) * inv[k]
            t2 = (half[k] - cen[..., k]) * inv[k]
            yield np.minimum(t1, t2), np.maximum(t1, t2)

    # slab test of every (M, A) cell; the centre is inside, so t_near < 0 < t_far
    t_near, t_far = np.full((len(c), a), -np.inf), np.full((len(c), a), np.inf)
    for lo, hi in slabs(c[:, None], [inv[vi] for inv in inv_axes]):
        np.maximum(lo, t_near, out=t_near)
        np.minimum(hi, t_far, out=t_far)
    width = 2 * np.maximum(-t_near, t_far) + 2 * JAW_CLEARANCE
    ok = (-t_near >= CENTRE_MARGIN) & (t_far >= CENTRE_MARGIN) & (width <= max_width)
    # faces hit and contacts, on the cells that pass so far (the others stay -1)
    rows = np.flatnonzero(ok)
    cm, ca = np.divmod(rows, a)
    cen, u = c[cm], axes[vi[cm], ca]
    near, far = t_near.reshape(-1)[rows], t_far.reshape(-1)[rows]
    face_near, face_far = np.zeros(len(rows), np.intp), np.zeros(len(rows), np.intp)
    t_lo, t_hi = np.full(len(rows), -np.inf), np.full(len(rows), np.inf)
    for k, (lo, hi) in enumerate(slabs(cen, [inv[vi[cm], ca] for inv in inv_axes])):
        face_near = np.where(lo > t_lo, k, face_near)
        t_lo = np.maximum(lo, t_lo)
        face_far = np.where(hi < t_hi, k, face_far)
        t_hi = np.minimum(hi, t_hi)
    edge_ok = np.ones(len(rows), bool)
    contacts = []
    for t, face in ((near, face_near), (far, face_far)):
        q = cen + t[:, None] * u
        margin = half - np.abs(q)  # contact to the face planes of each axis
        np.put_along_axis(margin, face[:, None], np.inf, -1)
        edge_ok &= np.minimum(np.minimum(margin[:, 0], margin[:, 1]), margin[:, 2]) >= EDGE_MARGIN
        contacts.append((q, face))
    # the evaluator's antipodal test on the contacts and their face normals
    (q1, f1), (q2, f2) = ((q[edge_ok], f[edge_ok]) for q, f in contacts)
    n1, n2 = np.zeros_like(q1), np.zeros_like(q2)
    held = np.arange(len(q1))
    n1[held, f1] = np.sign(q1[held, f1])
    n2[held, f2] = np.sign(q2[held, f2])
    cell_mu = np.full(len(c) * a, -1.0)
    cell_mu[rows[edge_ok]] = portable_min_friction(q1, n1, q2, n2, MU_GRID)
    shape = (len(p), v, a, d)
    mu = np.full(shape, -1, np.float32)
    width_out = np.zeros(shape, np.float32)
    mu[pi, vi, :, di] = cell_mu.reshape(-1, a)
    width_out[pi, vi, :, di] = width
    return mu, width_out


def _separated(parts, frames, which, p, half):
    """Separating-axis test (all 15 axes) of gripper-frame boxes against the model box at 0.

    ``parts``: (centre, half sizes) pairs, each (N, 3), of boxes in the gripper frame;
    ``frames[which]`` (N, 3, 3) gripper axes (columns) in the model frame; ``p`` (N, 3) gripper
    origin. True = no part overlaps the box. What depends on the axes alone is computed once per
    frame for all parts.
    """
    absr = np.abs(frames)
    rot_t = np.ascontiguousarray(frames.swapaxes(1, 2))  # rows: gripper axes
    radius = matvec(absr.swapaxes(1, 2), half)[which]  # the box's half size along gripper axes
    axes = np.cross(rot_t[:, :, None], np.eye(3)).reshape(-1, 9, 3)  # edge-edge axes g_i x e_k
    usable = (norm(axes) > 1e-6)[which]  # parallel edges: face axes decide
    axes_g = np.abs(matvec(rot_t[:, None], axes))[which]  # the axes in the gripper frame
    r_box = dot(np.abs(axes), half)[which]
    rot, absr, rot_t, axes = frames[which], absr[which], rot_t[which], axes[which]
    clear = np.ones(len(which), bool)
    for cen_g, ext_g in parts:
        centre = p + matvec(rot, cen_g)  # part centre in the model frame
        sep = np.any(np.abs(centre) > half + matvec(absr, ext_g), axis=1)
        local = matvec(rot_t, -centre)  # box centre relative to the part, gripper axes
        sep |= np.any(np.abs(local) > ext_g + radius, axis=1)
        r_part = dot(axes_g, ext_g[:, None])
        sep |= np.any(usable & (np.abs(dot(centre[:, None], axes)) > r_part + r_box), axis=1)
        clear &= sep
    return clear


def _gripper_parts(width, depth, gripper: Gripper = GRASPNET_GRIPPER):
    """(centre, half size) in the gripper frame of the left finger, right finger, base, hull."""
    base_depth, finger, height = gripper.base_depth, gripper.finger_width, gripper.height
    h = width / 2
    n = len(h)
    zero = np.zeros(n)
    fx, fe = (depth - base_depth) / 2, (depth + base_depth) / 2
    hz = np.full(n, height / 2)
    fy = h + finger / 2
    finger_ext = np.stack([fe, np.full(n, finger / 2), hz], 1)
    left = (np.stack([fx, -fy, zero], 1), finger_ext)
    right = (np.stack([fx, fy, zero], 1), finger_ext)
    bx = -base_depth - finger / 2
    base = (np.stack([np.full(n, bx), zero, zero], 1),
            np.stack([np.full(n, finger / 2), h + finger, hz], 1))
    back = -base_depth - finger
    hull = (np.stack([(depth + back) / 2, zero, zero], 1),
            np.stack([(depth - back) / 2, h + finger, hz], 1))
    return left, right, base, hull


def _cells(mu, width, grid, gripper: Gripper | None = None):
    """Cells with mu > 0 (flat index order): flat index, the (V * A, 3, 3) rotations and each
    cell's one, its label point, width and depth; the angles and depths are the gripper's (None:
    GraspNet's a * pi / 12 and (d + 1) * 0.01). Cells share the rotations and the points, so
    what depends on those alone is computed once and gathered."""
    v, a, d = grid
    idx = np.flatnonzero(mu.reshape(-1) > 0)
    pi, vi, ai, di = np.unravel_index(idx, mu.shape)
    if gripper is None:
        rot, depths = grasp_frames(v, a), _depths(d)
    else:
        rot, depths = grasp_frames(v, a, gripper.angles()), gripper.depths()
    return idx, rot.reshape(-1, 3, 3), vi * rot.shape[1] + ai, pi, \
        width.reshape(-1)[idx].astype(np.float64), depths[di]


def box_self_collision(half, points, mu, width, grid) -> np.ndarray:
    """(Np, V, A, D) bool: fingers or base overlap the box, for cells with mu > 0."""
    out = np.zeros(mu.size, bool)
    idx, frames, fi, pi, w, dep = _cells(mu, width, grid)
    if len(idx):
        out[idx] = ~_separated(_gripper_parts(w, dep)[:3], frames, fi,
                               np.asarray(points, np.float64)[pi], np.asarray(half, np.float64))
    return out.reshape(mu.shape)


def scene_collision(own_collision, mu, width, points, grid, pose, others) -> np.ndarray:
    """(Np, V, A, D) bool scene collision of one object instance (cells with mu > 0).

    ``pose``: 4x4 model -> table frame of the instance; ``others``: (half, 4x4 pose) of the other
    boxes of the scene. The table top is z = 0 of the table frame.
    """
    out = own_collision.reshape(-1).copy()
    idx, frames, fi, pi, w, dep = _cells(mu, width, grid)
    keep = ~out[idx]
    idx, fi, pi, w, dep = idx[keep], fi[keep], pi[keep], w[keep], dep[keep]
    if not len(idx):
        return out.reshape(mu.shape)
    points = np.asarray(points, np.float64)
    r_t, t_t = pose[:3, :3], pose[:3, 3]
    (hull_c, hull_e) = _gripper_parts(w, dep)[3]
    hit = _below_table(frames, fi, points, pi, hull_c, hull_e, pose)
    reach = norm(hull_e + np.abs(hull_c))
    for half, other in others:
        inv = rigid_inverse(other)
        r_o = matmul(inv[:3, :3], r_t)
        # gripper origins (the label points) in the other's frame
        points_o = matvec(r_o, points) + (matvec(inv[:3, :3], t_t) + inv[:3, 3])
        near = ~hit & (norm(points_o)[pi] < reach + norm(half))
        if near.any():
            hit[near] = ~_separated([(hull_c[near], hull_e[near])], matmul(r_o, frames),
                                    fi[near], points_o[pi[near]], np.asarray(half, np.float64))
    out[idx[hit]] = True
    return out.reshape(mu.shape)


def _below_table(frames, which, points, point, hull_c, hull_e, pose) -> np.ndarray:
    """Cells (rotation ``frames[which]``, origin ``points[point]``) whose gripper hull reaches
    below the table top (z = 0 of the table frame)."""
    r_t, t_t = pose[:3, :3], pose[:3, 3]
    rot_t = matmul(r_t, frames)[which]  # gripper axes in the table frame
    centre_t = (matvec(r_t, points) + t_t)[point] + matvec(rot_t, hull_c)
    return centre_t[:, 2] - dot(np.abs(rot_t[:, 2, :]), hull_e) < 0


def march_exit(shape, centres: np.ndarray, axes: np.ndarray, limit: float) -> np.ndarray:
    """Distance t > 0 where ``centres + t * axes`` (inside the shape) first leaves it, NaN when
    it stays inside up to ``limit``: 1 mm steps, then 30 bisections."""
    ts = np.arange(1, int(np.ceil(limit / MARCH_STEP)) + 2) * MARCH_STEP
    out = np.full(len(centres), np.nan)
    for s in range(0, len(centres), 4096):
        c, u = centres[s:s + 4096, None], axes[s:s + 4096, None]
        outside = shape.sdf(c + ts[:, None] * u) >= 0  # (n, K)
        found = outside.any(1)
        k = np.argmax(outside, 1)
        lo = np.where(k > 0, ts[np.maximum(k - 1, 0)], 0.0)
        hi = ts[k]
        for _ in range(30):
            mid = (lo + hi) / 2
            out_mid = shape.sdf(c[:, 0] + mid[:, None] * u[:, 0]) >= 0
            hi, lo = np.where(out_mid, mid, hi), np.where(out_mid, lo, mid)
        out[s:s + 4096] = np.where(found, hi, np.nan)
    return out


def _clear_path(shape, starts: np.ndarray, axes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """True where ``starts + t * axes`` stays outside the shape for t in (0, length]."""
    ok = np.ones(len(starts), bool)
    ts = np.arange(1, int(np.ceil(max(lengths.max(initial=0), 0) / MARCH_STEP)) + 1) * MARCH_STEP
    for s in range(0, len(starts), 4096):
        c, u, n = starts[s:s + 4096, None], axes[s:s + 4096, None], lengths[s:s + 4096, None]
        inside = (shape.sdf(c + ts[:, None] * u) < 0) & (ts[None] <= n)
        end = shape.sdf(c[:, 0] + n * u[:, 0]) < 0  # the open jaw itself
        ok[s:s + 4096] = ~inside.any(1) & ~end
    return ok


def _on_edge(shape, q: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Contacts within EDGE_MARGIN (along the tangent plane) of a normal turn above EDGE_ANGLE."""
    helper = np.where(np.abs(n[:, :1]) < 0.9, np.eye(3)[0], np.eye(3)[1])
    t1 = np.cross(n, helper)
    t1 /= norm(t1)[:, None]
    t2 = np.cross(n, t1)
    edge = np.zeros(len(q), bool)
    for t in (t1, -t1, t2, -t2):
        edge |= dot(shape.normal(q + EDGE_MARGIN * t), n) < cos(EDGE_ANGLE)
    return edge


def shape_grasp_labels(shape, points: np.ndarray, grid: tuple[int, int, int],
                       max_width: float = MAX_WIDTH):
    """μ and widths of every cell of the label points of a curved or concave shape, the
    counterpart of :func:`box_grasp_labels` (same returns) from the shape's signed distance."""
    v, a, d = grid
    rot = grasp_frames(v, a)
    p = np.asarray(points, np.float64)
    centre = p[:, None, None, :] + _depths(d)[:, None] * rot[None, :, None, 0, :, 0]
    pi, vi, di = np.nonzero(shape.sdf(centre) < 0)  # jaw centre strictly inside
    c = np.repeat(centre[pi, vi, di], a, axis=0)  # (M * A, 3), angles fastest
    u = rot[vi][..., 1].reshape(-1, 3)  # jaw axes
    limit = max_width / 2
    t_far = march_exit(shape, c, u, limit)
    t_near = march_exit(shape, c, -u, limit)
    with np.errstate(invalid='ignore'):
        width = 2 * np.maximum(t_near, t_far) + 2 * JAW_CLEARANCE
        ok = (t_near >= CENTRE_MARGIN) & (t_far >= CENTRE_MARGIN) & (width <= max_width)
    q1, q2 = c - t_near[:, None] * u, c + t_far[:, None] * u
    rows = np.flatnonzero(ok)
    half = width[rows] / 2
    ok[rows] &= _clear_path(shape, q1[rows], -u[rows], half - t_near[rows])
    ok[rows] &= _clear_path(shape, q2[rows], u[rows], half - t_far[rows])
    rows = np.flatnonzero(ok)
    n1, n2 = shape.normal(q1[rows]), shape.normal(q2[rows])
    ok[rows] &= ~(_on_edge(shape, q1[rows], n1) | _on_edge(shape, q2[rows], n2))
    keep = ok[rows]
    cell_mu = np.full(len(c), -1.0)
    cell_mu[rows[keep]] = portable_min_friction(q1[rows[keep]], n1[keep], q2[rows[keep]],
                                                n2[keep], MU_GRID)
    shape_out = (len(p), v, a, d)
    mu = np.full(shape_out, -1, np.float32)
    width_out = np.zeros(shape_out, np.float32)
    mu[pi, vi, :, di] = cell_mu.reshape(-1, a)
    width_out[pi, vi, :, di] = np.nan_to_num(width, nan=0.0).reshape(-1, a)
    return mu, width_out


def points_collision(mu, width, points, grid, obstacle_points: np.ndarray,
                     table_pose: np.ndarray | None = None,
                     skip: np.ndarray | None = None, gripper: Gripper | None = None,
                     chunk: int = 1 << 16) -> np.ndarray:
    """(Np, V, A, D) bool for cells with mu > 0: the evaluator's point test (points of
    ``obstacle_points``, model frame, in a finger or the base), or, with ``table_pose`` (model ->
    table), the gripper hull below the table top; cells flagged in ``skip`` stay flagged.
    ``gripper`` gives the fingers, base, angles and depths (None: GraspNet's); the cells are
    tested ``chunk`` at a time."""
    out = np.zeros(mu.size, bool) if skip is None else skip.reshape(-1).copy()
    idx, frames, fi, pi, w, dep = _cells(mu, width, grid, gripper)
    keep = ~out[idx]
    idx, fi, pi, w, dep = idx[keep], fi[keep], pi[keep], w[keep], dep[keep]
    points = np.asarray(points, np.float64)
    g = GRASPNET_GRIPPER if gripper is None else gripper
    obstacle_points = np.asarray(obstacle_points, np.float64)
    for s in range(0, len(idx), chunk):
        part = slice(s, s + chunk)
        hit = np.zeros(len(idx[part]), bool)
        if table_pose is not None:
            hull_c, hull_e = _gripper_parts(w[part], dep[part], g)[3]
            hit |= _below_table(frames, fi[part], points, pi[part], hull_c, hull_e, table_pose)
        if len(obstacle_points):
            rows = np.zeros((len(hit), 17))
            rows[:, 1], rows[:, 2], rows[:, 3] = w[part], g.height, dep[part]
            rows[:, 4:13], rows[:, 13:16] = frames[fi[part]].reshape(-1, 9), points[pi[part]]
            hit |= gripper_collision(rows, obstacle_points, g.height, g.base_depth,
                                     g.finger_width, empty_thresh=0)[0]
        out[idx[part][hit]] = True
    return out.reshape(mu.shape)


def tolerance_labels(points: np.ndarray, mu: np.ndarray, mu_thresh: float = 0.55,
                     ratio_thresh: float = 0.8) -> np.ndarray:
    """graspnet-baseline's tolerance rule (generate_tolerance_label.py ``worker``), vectorised.

    For radii r = 0, 0.001, ..., 0.050: over the label points within r (distance <= r, the point
    itself included), the fraction with 0 < μ <= 0.55 per cell; cells at >= 0.8 get r; the loop
    stops at the first radius where no cell passes. Radii with the same neighbours pass the same
    cells, so each point is checked once per distinct neighbour count, nearest neighbours first
    (a running count of good neighbours per cell), on the cells where some label point is good
    (no other cell can pass).
    """
    n = len(points)
    good = ((mu > 0) & (mu <= mu_thresh)).reshape(n, -1)
    cols = np.flatnonzero(good.any(0))
    good_cols = good[:, cols]
    p = np.asarray(points, np.float32)
    dists = np.linalg.norm(p[:, None, :] - p[None, :, :], axis=-1)
    radii = np.float32(_TOLERANCE_RADII)
    counts = (dists[:, :, None] <= radii).sum(1)  # (n, R) neighbours within each radius
    need = np.ceil(ratio_thresh * counts - 1e-9)  # the worker's mean >= 0.8
    orders = np.argsort(dists, axis=1, kind='stable')
    out = np.zeros(good.shape, np.float32)
    for i in range(n):
        good_near = np.zeros(len(cols), np.int16)  # good cells among the neighbours so far
        best = np.zeros(len(cols), np.float32)
        seen = 0
        for r in np.flatnonzero(np.diff(counts[i], append=-1)):  # last radius of each count
            good_near += good_cols[orders[i, seen:counts[i, r]]].sum(0, dtype=np.int16)
            seen = counts[i, r]
            passing = good_near >= need[i, r]
            if not passing.any():  # the worker's loop breaks at the first empty radius
                break
            best[passing] = radii[r]
        out[i, cols] = best
    return out.reshape(mu.shape)
