"""The parallel-jaw gripper against point sets: graspnetAPI's evaluation check and the
reference test scripts' ``ModelFreeCollisionDetector``.

Gripper frame: x along the approach (towards the object), y between the jaws, z the jaw height;
the grasp translation is the origin, ``depth`` how far the finger tips reach past it. The
evaluation's check runs as a compiled loop over grasp-point pairs (:mod:`.compiled`); the
detectors transform points into every grasp's frame, chunked over grasps so memory stays
bounded.
"""
from __future__ import annotations

import numpy as np

from .gripper import GripperLike, build_gripper
from .points import voxel_downsample

GRASP_ROTATION = slice(4, 13)
GRASP_TRANSLATION = slice(13, 16)


def _points_in_gripper(points: np.ndarray, translations: np.ndarray,
                       rotations: np.ndarray) -> np.ndarray:
    """(G, P, 3): the points in each grasp's frame, (p - t) @ R, summed in a fixed order so that
    the bits do not depend on the CPU's BLAS (:mod:`.portable`); column by column, as fast."""
    d = [points[None, :, k] - translations[:, k, None] for k in range(3)]
    return np.stack([_column(d, rotations[:, :, j, None]) for j in range(3)], axis=-1)


def _column(d: list, r: np.ndarray) -> np.ndarray:
    """One coordinate of (p - t) @ R from the differences ``d`` (x, y, z) and R's column."""
    return d[0] * r[:, 0] + d[1] * r[:, 1] + d[2] * r[:, 2]


def gripper_collision(grasps: np.ndarray, points: np.ndarray, height: float = 0.02,
                      depth_base: float = 0.02, finger_width: float = 0.01,
                      empty_thresh: int = 10):
    """graspnetAPI's ``collision_detection`` for one object's grasps against ``points``.

    Args:
        grasps: (G, 17) GraspGroup rows (width, depth, rotation, translation are read).
        points: (P, 3) scene points already cropped to the object's workspace.

    Returns:
        (collision, empty) bool (G,) each; collision includes empty (fewer than
        ``empty_thresh`` points between the fingers), as graspnetAPI counts it.
    """
    hit, empty = gripper_contacts(grasps, points, height, depth_base, finger_width,
                                  empty_thresh)
    return hit | empty, empty


def gripper_contacts(grasps: np.ndarray, points: np.ndarray, height: float = 0.02,
                     depth_base: float = 0.02, finger_width: float = 0.01,
                     empty_thresh: int = 10, within=None):
    """The two verdicts :func:`gripper_collision` merges, apart: (hit, empty) bool (G,) each -
    points inside a finger or the palm, and fewer than ``empty_thresh`` points between the
    fingers (a grasp can be both).

    ``within=(lo, hi)`` counts only the points strictly inside that box (graspnetAPI's object
    workspace) without copying them out. Computed in float64 by a compiled loop
    (:func:`.compiled.jaw_contacts`): the evaluation tests ~10^5 grasp-point pairs a frame.
    """
    from .compiled import jaw_contacts  # numba: imported when a collision is first tested
    grasps = np.asarray(grasps, dtype=np.float64).reshape(-1, 17)
    points = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    if within is None:
        lo, hi = np.full(3, -np.inf), np.full(3, np.inf)
    else:
        lo, hi = (np.asarray(b, dtype=np.float64).reshape(3) for b in within)
    half = grasps[:, 1] / 2
    hit = np.zeros(len(grasps), dtype=bool)
    empty = np.zeros(len(grasps), dtype=bool)
    jaw_contacts(points, lo, hi, np.ascontiguousarray(grasps[:, GRASP_TRANSLATION]),
                 np.ascontiguousarray(grasps[:, GRASP_ROTATION]).reshape(-1, 3, 3),
                 np.ascontiguousarray(grasps[:, 3]), half, half + finger_width, height / 2,
                 depth_base, depth_base + finger_width, int(empty_thresh), hit, empty)
    return hit, empty


class ModelFreeCollisionDetector:
    """Grasps that collide with an observed cloud (the reference test scripts' filter).

    The cloud is voxel-downsampled once (``voxel_size``); a grasp collides when the points in
    its fingers, palm and the ``approach_dist`` corridor behind the palm, divided by that
    volume in voxels, exceed ``collision_thresh`` (the gripper's finger length and width:
    GraspNet's 0.06 and 0.01 by default).
    """

    def __init__(self, scene_points: np.ndarray, voxel_size: float = 0.005,
                 gripper: GripperLike = None):
        gripper = build_gripper(gripper)
        self.finger_width, self.finger_length = gripper.finger_width, gripper.finger_length
        self.voxel_size = float(voxel_size)
        self.scene_points = voxel_downsample(np.asarray(scene_points, dtype=np.float64),
                                             self.voxel_size)

    def detect(self, grasps: np.ndarray, approach_dist: float = 0.03,
               collision_thresh: float = 0.05, chunk: int = 64) -> np.ndarray:
        """(G,) bool, True where grasp row ``g`` (GraspGroup layout) collides."""
        grasps = np.asarray(grasps)
        approach_dist = max(approach_dist, self.finger_width)
        fl, fw = self.finger_length, self.finger_width
        out = np.zeros(len(grasps), dtype=bool)
        for s in range(0, len(grasps), chunk):
            part = grasps[s:s + chunk].astype(np.float64)
            target = _points_in_gripper(self.scene_points, part[:, GRASP_TRANSLATION],
                                        part[:, GRASP_ROTATION].reshape(-1, 3, 3))
            heights = part[:, 2][:, None]
            depths = part[:, 3][:, None]
            widths = part[:, 1][:, None]
            x, y, z = target[..., 0], target[..., 1], target[..., 2]
            mask1 = (z > -heights / 2) & (z < heights / 2)
            mask2 = (x > depths - fl) & (x < depths)
            mask3 = y > -(widths / 2 + fw)
            mask4 = y < -widths / 2
            mask5 = y < (widths / 2 + fw)
            mask6 = y > widths / 2
            mask7 = (x <= depths - fl) & (x > depths - fl - fw)
            mask8 = (x <= depths - fl - fw) & (x > depths - fl - fw - approach_dist)
            fingers = mask1 & mask2 & ((mask3 & mask4) | (mask5 & mask6))
            behind = mask1 & mask3 & mask5 & (mask7 | mask8)
            hits = (fingers | behind).sum(axis=1)
            h, w = heights[:, 0], widths[:, 0]
            voxel3 = self.voxel_size ** 3
            volume = (h * fl * fw / voxel3) * 2 + h * (w + 2 * fw) * fw / voxel3 \
                + h * (w + 2 * fw) * approach_dist / voxel3
            out[s:s + chunk] = hits / (volume + 1e-6) > collision_thresh
        return out


def filter_collisions(grasps: np.ndarray, cloud: np.ndarray, voxel_size: float = 0.01,
                      approach_dist: float = 0.05, collision_thresh: float = 0.01,
                      gripper: GripperLike = None) -> np.ndarray:
    """The grasp rows that do not collide with ``cloud``; ``collision_thresh <= 0`` keeps all."""
    if collision_thresh <= 0 or len(grasps) == 0:
        return grasps
    detector = ModelFreeCollisionDetector(cloud, voxel_size, gripper)
    return grasps[~detector.detect(grasps, approach_dist, collision_thresh)]


def hggd_collision_free(grasps: np.ndarray, cloud: np.ndarray, voxel_size: float = 0.01,
                        approach_dist: float = 0.05, height: float = 0.01,
                        finger_width: float = 0.01, finger_length: float = 0.04,
                        depth: float = 0.02, min_points: int = 2, chunk: int = 64) -> np.ndarray:
    """(G,) bool: the grasps HGGD's test script keeps (its ``ModelFreeCollisionDetector`` in
    ``mode='graspnet'``): no point of the voxel-downsampled cloud in either finger box (x in
    (depth − finger_length, depth), abs(z) < height / 2, beyond the jaws by up to
    ``finger_width``), none in the box behind the fingers (x in (depth − finger_length −
    finger_width − approach_dist, depth − finger_length], across the jaws and fingers), and more
    than ``min_points`` between the jaws. Height and depth are the detector's constants, not
    the rows'; only the rows' width, rotation and translation are read. Computed in float64
    (the reference casts cloud and grasps to float16)."""
    grasps = np.asarray(grasps, dtype=np.float64).reshape(-1, 17)
    points = voxel_downsample(np.asarray(cloud, dtype=np.float64), voxel_size)
    keep = np.zeros(len(grasps), dtype=bool)
    for s in range(0, len(grasps), chunk):
        part = grasps[s:s + chunk]
        target = _points_in_gripper(points, part[:, GRASP_TRANSLATION],
                                    part[:, GRASP_ROTATION].reshape(-1, 3, 3))
        x, y, z = target[..., 0], target[..., 1], target[..., 2]
        half = part[:, 1][:, None] / 2
        band = (z > -height / 2) & (z < height / 2)
        along = (x > depth - finger_length) & (x < depth)
        outer_left, inner_left = y > -(half + finger_width), y < -half
        outer_right, inner_right = y < half + finger_width, y > half
        behind = (x <= depth - finger_length) & \
            (x > depth - finger_length - finger_width - approach_dist)
        jaws = band & along
        fingers = (jaws & outer_left & inner_left) | (jaws & outer_right & inner_right)
        shifting = band & outer_left & outer_right & behind
        between = (jaws & ~inner_left & ~inner_right).sum(axis=1) > min_points
        keep[s:s + chunk] = between & ~fingers.any(axis=1) & ~shifting.any(axis=1)
    return keep
