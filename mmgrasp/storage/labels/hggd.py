"""HGGD's per-image grasps from one frame's dense labels: the rules of ``convert_grasp.py``'s
6-D dataset (THU-VCLab/HGGD@69580ff with its ``util.py`` and vendored graspnetAPI 1.2.10),
written from the reference in its own float steps, so that the arrays equal the script's bit
for bit when given the same random draws (``tests/data/hggd_labels_golden``); its ``arctan2``
and ``arcsin`` go through the C library on every CPU (:mod:`mmgrasp.geometry.libm`).

Per frame:

1. graspnetAPI's ``loadGrasp('6d', fric_coef_thresh=0.2)``: the cells with 0 < μ ≤ 0.2
   (compared in float32) free of scene collision, R = pose · R(−view, angle), t = pose · point,
   score 1.1 − μ, height 0.02; every row rounded to float32 (``obj_grasp_array``).
2. Kept: R[2, 0] > 0 (the approach points away from the camera: the only grasps the
   (θ, γ, β) encoding represents), 0.03 < width < 0.15, 0.015 < depth < 0.025 (the 0.02 depth
   class), compared in float64.
3. At most 5 000, drawn without replacement (the reference's ``random.sample``, unseeded;
   here drawn from the frame's own generator, or given).
4. Centre refinement: the model points of the frame's objects, posed by the annotation, 40 000
   of them drawn; per grasp the points inside the closing volume (abs(z) < h/2,
   depth − 0.04 < x < depth, abs(y) < w/2 in the gripper frame) move the centre along the jaw
   axis to the middle of their y extent (unchanged when there is none); the width stays.
5. grasp_nms at 0.02 m / 60°, the package's tie order.
6. The rectangle and (θ, γ, β): key points projected with the camera's intrinsics, the grasp
   moved onto the optical axis at its depth (θ, γ, β, widths and heights from there), the
   centres kept where they project inside the image.

The reference also computes a visibility mask (the reconstructed centre within 1 cm of one of
40 000 drawn depth points) but saves its arrays without it; ``apply_visibility`` applies it.

What differs from the script, by decision (see ``docs/user_guides/hggd_labels.md``): the draws
come from the frame (seed, scene, camera, frame) instead of an unseeded ``random``; a frame with
fewer than 40 000 model or depth points uses them all, and a frame without grasps gives empty
arrays (the script raises on both); the refinement is computed in chunks of grasps on the model
points near them (the values of every point it reads are the script's), not as one
(5000, 4, 40 000) product.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from scipy.spatial import cKDTree

from mmgrasp.geometry import libm
from mmgrasp.geometry.nms import grasp_nms

#: The saved arrays of ``{ann}_view.npz``: name -> (trailing shape, dtype), in file order.
FIELDS: Dict[str, Tuple[tuple, type]] = {
    'centers_2d': ((2,), np.float64), 'opens_2d': ((2,), np.float64),
    'thetas_rad': ((), np.float32), 'gammas_rad': ((), np.float64),
    'betas_rad': ((), np.float64), 'widths_2d': ((), np.float32),
    'heights_2d': ((), np.float32), 'scores_from_6d': ((), np.float32),
    'object_ids': ((), np.int32), 'center_z_depths': ((), np.float64)}

MAX_MU = np.float32(0.2)  # loadGrasp's fric_coef_thresh, compared with float32 μ
APPROACH_THRESHOLD = 0.0  # R[2, 0] > this (convert_grasp.py's ``threshold``)
WIDTH_RANGE = (0.03, 0.15)
DEPTH_RANGE = (0.015, 0.025)
MAX_GRASPS = 5000
MODEL_POINTS = 40000
CLOUD_POINTS = 40000
GRASP_HEIGHT = 0.02
FINGER_LENGTH = 0.04
NMS_TRANSLATION = 0.02
NMS_ROTATION = 60 * np.pi / 180
VISIBILITY_RADIUS = 0.01
#: ``util.get_camera_intrinsic``: the reference's hard-coded (fx, fy, cx, cy) at 1280 x 720.
GRASPNET_INTRINSICS = {'realsense': (927.17, 927.37, 651.32, 349.62),
                       'kinect': (631.55, 631.21, 638.43, 366.50)}
GRASPNET_IMAGE_SIZE = (1280, 720)
REFERENCE = 'THU-VCLab/HGGD@69580ff convert_grasp.py (6d dataset), util.py, customgraspnetAPI'
_REFINE_CHUNK = 32  # grasps whose closing volumes are tested in one array operation


def intrinsics_matrix(fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


@dataclass
class InstanceLabels:
    """One object instance of a frame: its label grids and where the frame sees it."""
    object_id: int
    pose: np.ndarray  # (4, 4) model -> camera (GraspNet: the annotation's float32 matrix)
    points: np.ndarray  # (Np, 3) float32 label points, model frame
    scores: np.ndarray  # (Np, V, A, D) float32 μ
    widths: np.ndarray  # (Np, V, A, D) float32
    collision: np.ndarray  # (Np, V, A, D) bool scene collision
    model_points: np.ndarray  # (N, 3) float64 model vertices, model frame


@dataclass
class DepthCloud:
    """What the visibility mask reads: the frame's raw depth and the intrinsics it was taken
    with (GraspNet: ``camK.npy``, 1000 units per metre as the reference hard-codes)."""
    depth: np.ndarray  # (H, W) raw values
    intrinsics: np.ndarray  # (3, 3)
    factor: float


class FrameDraws:
    """Where a frame's subsamples come from: index arrays given per name (e.g. the draws the
    reference made), else ``rng`` without replacement, in draw order. A population no larger
    than the sample is taken whole (the reference raises there)."""

    NAMES = ('model_points', 'subsample', 'cloud')

    def __init__(self, rng: Optional[np.random.Generator] = None, **given: np.ndarray):
        unknown = set(given) - set(self.NAMES)
        if unknown:
            raise ValueError(f'unknown draws {sorted(unknown)}; expected {self.NAMES}')
        self.rng = rng
        self.given = given

    def take(self, name: str, population: int, k: int) -> np.ndarray:
        if name in self.given:
            index = np.asarray(self.given[name], dtype=np.int64).reshape(-1)
            if len(index) != min(k, population) or (len(index) and (
                    index.min() < 0 or index.max() >= population)) or \
                    len(np.unique(index)) != len(index):
                raise ValueError(f'draw {name!r}: expected {min(k, population)} distinct indices '
                                 f'below {population}, got {len(index)}')
            return index
        if population <= k:
            return np.arange(population)
        if self.rng is None:
            raise ValueError(f'draw {name!r} of {k} from {population} needs a generator')
        return self.rng.choice(population, k, replace=False)


# ------------------------------------------------------------------ 1. loadGrasp('6d')
def template_views(num_views: int) -> np.ndarray:
    """graspnetAPI's ``generate_views`` as numpy 1.23 evaluates it: float32 throughout (its
    float64 ``phi`` scalar is cast to the array's float32 by value-based casting)."""
    idxs = np.arange(num_views, dtype=np.float32)
    phi = np.float32((np.sqrt(5) - 1) / 2)
    z = (2 * idxs + 1) / num_views - 1
    x = np.sqrt(1 - z ** 2) * np.cos(2 * idxs * np.pi * phi)
    y = np.sqrt(1 - z ** 2) * np.sin(2 * idxs * np.pi * phi)
    return np.stack([x, y, z], axis=1) + np.zeros(3, dtype=np.float32)


def viewpoint_rotations(towards: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """graspnetAPI's ``batch_viewpoint_params_to_matrix`` (float32): [x y z] · Rx(angle)."""
    axis_x = towards
    ones = np.ones(axis_x.shape[0], dtype=axis_x.dtype)
    zeros = np.zeros(axis_x.shape[0], dtype=axis_x.dtype)
    axis_y = np.stack([-axis_x[:, 1], axis_x[:, 0], zeros], axis=-1)
    axis_y[np.linalg.norm(axis_y, axis=-1) == 0] = np.array([0, 1, 0])
    axis_x = axis_x / np.linalg.norm(axis_x, axis=-1, keepdims=True)
    axis_y = axis_y / np.linalg.norm(axis_y, axis=-1, keepdims=True)
    axis_z = np.cross(axis_x, axis_y)
    sin, cos = np.sin(angles), np.cos(angles)
    r1 = np.stack([ones, zeros, zeros, zeros, cos, -sin, zeros, sin, cos], axis=-1)
    r2 = np.stack([axis_x, axis_y, axis_z], axis=-1)
    return np.matmul(r2, r1.reshape(-1, 3, 3)).astype(np.float32)


def transform_points(points: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """graspnetAPI's ``transform_points``: homogeneous points in their dtype, one matmul."""
    ones = np.ones([points.shape[0], 1], dtype=points.dtype)
    return np.matmul(trans, np.concatenate([points, ones], axis=-1).T).T[:, :3]


def grid_values(grid: Tuple[int, int, int]) -> Tuple[np.ndarray, np.ndarray]:
    """The float32 angle and depth of each grid index (the values of a label file's
    ``offsets[..., 0]`` and ``[..., 1]``: a·π/12 and (d + 1)·0.01; the label store keeps
    widths only)."""
    _, a, d = grid
    return ((np.arange(a) * np.pi / 12).astype(np.float32),
            (np.arange(1, d + 1) * 0.01).astype(np.float32))


def label_grasps(instances: Sequence[InstanceLabels],
                 camera_pose: Optional[np.ndarray] = None) -> np.ndarray:
    """(n, 17) float64 GraspGroup rows of loadGrasp('6d', fric_coef_thresh=0.2) restricted to
    the 0.02 depth class, instance after instance, cells in C order.

    The depth class is taken before the arithmetic (each row's values depend on its own cell
    only), and each rotation is computed once per (view, angle) and instance; the values are
    loadGrasp's. With ``camera_pose`` (GraspNet) the pose is composed with it and its inverse
    as loadGrasp does.
    """
    parts = [np.zeros((0, 17), np.float64)]
    if not instances:
        return parts[0]
    grid = tuple(instances[0].scores.shape[1:])
    angles, depths = grid_values(grid)
    depth_class = np.flatnonzero((depths.astype(np.float64) > DEPTH_RANGE[0])
                                 & (depths.astype(np.float64) < DEPTH_RANGE[1]))
    views = template_views(grid[0])
    view_idx, angle_idx = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    table = viewpoint_rotations(-views[view_idx], angles[angle_idx])  # (V·A, 3, 3) float32
    inv_camera = None if camera_pose is None else np.linalg.inv(camera_pose)
    for inst in instances:
        trans = inst.pose if camera_pose is None else np.dot(camera_pose, inst.pose)
        mu = inst.scores[..., depth_class]
        cells = (mu <= MAX_MU) & (mu > 0) & ~inst.collision[..., depth_class]
        p, v, a, dk = np.nonzero(cells)
        rotations = np.matmul(trans[np.newaxis, :3, :3], table)
        points = transform_points(inst.points[p], trans)
        if inv_camera is not None:
            rotations = np.matmul(inv_camera[np.newaxis, :3, :3], rotations)
            points = transform_points(points, inv_camera)
        rows = np.empty((len(p), 17), np.float32)
        rows[:, 0] = np.float32(1.1) - mu[p, v, a, dk]
        rows[:, 1] = inst.widths[p, v, a, depth_class[dk]]
        rows[:, 2] = GRASP_HEIGHT
        rows[:, 3] = depths[depth_class][dk]
        rows[:, 4:13] = rotations.reshape(-1, 9)[v * grid[1] + a]
        rows[:, 13:16] = points
        rows[:, 16] = inst.object_id
        parts.append(rows)
    return np.concatenate(parts)


def hggd_mask(grasps: np.ndarray) -> np.ndarray:
    """``util.mask_grasp_group``: approach away from the camera, width and depth ranges."""
    widths, depths = grasps[:, 1], grasps[:, 3]
    return ((grasps[:, 10] > APPROACH_THRESHOLD) & (widths > WIDTH_RANGE[0])
            & (widths < WIDTH_RANGE[1]) & (depths > DEPTH_RANGE[0]) & (depths < DEPTH_RANGE[1]))


# ------------------------------------------------------------------ 4. centre refinement
def scene_model_points(instances: Sequence[InstanceLabels]) -> np.ndarray:
    """``loadSceneModel(align=False)``: every instance's model points posed by its annotation
    (not composed with the camera pose), concatenated in instance order."""
    parts = [transform_points(inst.model_points, inst.pose) for inst in instances]
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def refine_centres(grasps: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(n, 3) translations moved along the jaw axis to the middle of the y extent of
    ``points`` inside each grasp's closing volume (convert_grasp.py's refinement).

    Grasps are taken in chunks of nearby ones (sorted by 3 cm cell), each against the points
    within reach of one of its grasps (a point farther from the centre than the volume's corner
    is in none: local coordinates keep the norm of the offset). The local coordinates of the
    points read are the script's, from the same einsum on operands of the same memory layout.
    """
    n = len(grasps)
    rot = grasps[:, 4:13].reshape(-1, 3, 3)
    global_to_local = np.eye(4)[np.newaxis, ...].repeat(n, 0)
    global_to_local[:, 0:3, 0:3] = rot.transpose(0, 2, 1)
    global_to_local[:, 0:3, 3:4] = -np.matmul(rot.transpose(0, 2, 1),
                                             np.expand_dims(grasps[:, 13:16], axis=2))
    # (N, 4) C-ordered, read transposed, as the script's: einsum's rounding follows the layout
    homo = np.ascontiguousarray(np.concatenate([points, np.ones((len(points), 1))], axis=1))
    heights, depths, widths = grasps[:, 2:3], grasps[:, 3:4], grasps[:, 1:2]
    reach = np.sqrt(np.maximum(np.abs(depths), np.abs(depths - FINGER_LENGTH)) ** 2
                    + (widths / 2) ** 2 + (heights / 2) ** 2)[:, 0] + 1e-6
    low, high = np.full(n, 10.0), np.full(n, -10.0)  # the script's values for an empty volume
    balls = cKDTree(points).query_ball_point(grasps[:, 13:16], reach) if len(points) else \
        [[] for _ in range(n)]
    cell = np.floor(grasps[:, 13:16] / 0.03).astype(np.int64)
    order = np.lexsort((cell[:, 2], cell[:, 1], cell[:, 0]))
    for start in range(0, n, _REFINE_CHUNK):
        chunk = order[start:start + _REFINE_CHUNK]
        near = np.unique(np.concatenate([np.asarray(balls[i], np.int64) for i in chunk]))
        if not len(near):
            continue
        local = np.einsum('ijk,kn->ijn', global_to_local[chunk], homo[near].transpose(1, 0))
        local = local.transpose(0, 2, 1)[..., :3]
        h, d, w = heights[chunk], depths[chunk], widths[chunk]
        inside = ((local[..., 2] > -h / 2) & (local[..., 2] < h / 2)
                  & (local[..., 0] > d - FINGER_LENGTH) & (local[..., 0] < d)
                  & (local[..., 1] > -w / 2) & (local[..., 1] < w / 2))
        low[chunk] = ((local[..., 1] - 10) * inside).min(1) + 10
        high[chunk] = ((local[..., 1] + 10) * inside).max(1) - 10
    local_center = np.zeros((n, 4))
    local_center[:, 3] += 1
    local_center[:, 1] = (low + high) / 2
    centre = np.einsum('ijk,ki->ij', np.linalg.inv(global_to_local), local_center.transpose(1, 0))
    return centre[..., :3]


# ------------------------------------------------------------------ 6. rectangle encoding
def key_points(centers: np.ndarray, rotations: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """``util.get_batch_key_points``: centre, open point and the two height ends at the open
    side (offsets built in float32, then rotated in float64)."""
    points = np.zeros((centers.shape[0], 4, 3), dtype=np.float32)
    points[:, :, 0] -= 0.0
    points[:, 1:, 1] -= widths[:, np.newaxis] / 2
    points[:, 2, 2] += GRASP_HEIGHT / 2
    points[:, 3, 2] -= GRASP_HEIGHT / 2
    points = np.matmul(rotations, points.transpose(0, 2, 1)).transpose(0, 2, 1)
    return points + centers[:, np.newaxis, :]


def project(points: np.ndarray, intrinsics: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``util.batch_rgbdxyz_2_rgbxy_depth``: pixel (x, y) and depth in millimetres."""
    fx, fy = intrinsics[0, 0], intrinsics[1, 1]
    cx, cy = intrinsics[0, 2], intrinsics[1, 2]
    depths = 1000.0 * points[:, 2]
    coords = np.stack([points[:, 0] / points[:, 2] * fx + cx,
                       points[:, 1] / points[:, 2] * fy + cy], axis=-1)
    return coords, depths


def encode(grasps: np.ndarray, intrinsics: np.ndarray) -> Dict[str, np.ndarray]:
    """The saved arrays of every grasp (``convert_grasp.py`` ``grasp2rect`` and around)."""
    rotations, widths = grasps[:, 4:13].reshape(-1, 3, 3), grasps[:, 1]
    centers_2d, center_z_depths = project(
        key_points(grasps[:, 13:16], rotations, widths)[:, 0, :], intrinsics)
    on_axis = np.zeros((len(grasps), 3))
    on_axis[:, 2] = center_z_depths / 1000
    k6d = key_points(on_axis, rotations, widths)
    centers, _ = project(k6d[:, 0, :], intrinsics)
    opens, _ = project(k6d[:, 1, :], intrinsics)
    lefts, _ = project(k6d[:, 2, :], intrinsics)
    rights, _ = project(k6d[:, 3, :], intrinsics)
    rect = np.concatenate([centers, opens, np.linalg.norm(lefts - rights, axis=-1, keepdims=True),
                           grasps[:, 0:1], grasps[:, 16:17]], axis=-1).astype(np.float32)
    dy, dx = rect[:, 1] - rect[:, 3], rect[:, 0] - rect[:, 2]
    thetas = libm.arctan2(dy, -dx)
    gammas = libm.arcsin(np.clip((k6d[:, 1, 2] - k6d[:, 0, 2]) * 2 / widths, -1, 1))
    betas = libm.arcsin(np.clip((k6d[:, 2, 2] - k6d[:, 3, 2]) / np.cos(gammas) / grasps[:, 2],
                              -1, 1))
    widths_2d = np.sqrt(np.square(dx) + np.square(dy)) * 2
    widths_2d /= np.cos(gammas)
    heights = rect[:, 4]
    heights *= 2 / (1 + np.sqrt(1 - np.square(np.cos(gammas) * np.sin(betas))))
    opens_2d = np.stack([centers_2d[:, 0] - widths_2d / 2 * np.cos(thetas),
                         centers_2d[:, 1] + widths_2d / 2 * np.sin(thetas)], axis=-1)
    return dict(centers_2d=centers_2d, opens_2d=opens_2d, thetas_rad=thetas,
                gammas_rad=gammas, betas_rad=betas, widths_2d=widths_2d, heights_2d=heights,
                scores_from_6d=rect[:, 5], object_ids=np.round(rect[:, 6]).astype(np.int32),
                center_z_depths=center_z_depths)


def in_image(centers_2d: np.ndarray, image_size: Tuple[int, int]) -> np.ndarray:
    return ((np.min(centers_2d, axis=1) > 0) & (centers_2d[:, 0] < image_size[0])
            & (centers_2d[:, 1] < image_size[1]))


def reconstructed_centres(arrays: Dict[str, np.ndarray], intrinsics: np.ndarray) -> np.ndarray:
    """``rect2grasp``'s translations: the centre pixels (as the float32 rectangle holds them,
    minus the principal point in float32 as numpy 1.23 computes it) at their depth."""
    fx, fy = intrinsics[0, 0], intrinsics[1, 1]
    pixels = arrays['centers_2d'].astype(np.float32)
    z = arrays['center_z_depths'] / 1000
    x = z / fx * (pixels[:, 0] - np.float32(intrinsics[0, 2]))
    y = z / fy * (pixels[:, 1] - np.float32(intrinsics[1, 2]))
    return np.stack([x, y, z], axis=-1)


def depth_points(cloud: DepthCloud) -> np.ndarray:
    """``loadScenePointCloud(format='numpy')``: the depth > 0 pixels as camera points."""
    fx, fy = cloud.intrinsics[0, 0], cloud.intrinsics[1, 1]
    cx, cy = cloud.intrinsics[0, 2], cloud.intrinsics[1, 2]
    height, width = cloud.depth.shape
    xmap, ymap = np.meshgrid(np.arange(width), np.arange(height))
    z = cloud.depth / cloud.factor
    points = np.stack([(xmap - cx) / fx * z, (ymap - cy) / fy * z, z], axis=-1)
    return points[z > 0]


def visible(centres: np.ndarray, points: np.ndarray, chunk: int = 64) -> np.ndarray:
    """``util.remove_invisible_grasp_points``: a point within 1 cm of the centre."""
    out = np.zeros(len(centres), dtype=bool)
    if not len(points):
        return out
    for start in range(0, len(centres), chunk):
        dists = np.linalg.norm(centres[start:start + chunk, np.newaxis, :]
                               - points[np.newaxis, :, :], axis=-1)
        out[start:start + chunk] = dists.min(axis=1) < VISIBILITY_RADIUS
    return out


# ------------------------------------------------------------------ the frame
def empty_arrays() -> Dict[str, np.ndarray]:
    return {name: np.zeros((0, *shape), dtype) for name, (shape, dtype) in FIELDS.items()}


def frame_grasps(instances: Sequence[InstanceLabels], intrinsics: np.ndarray,
                 image_size: Tuple[int, int], draws: FrameDraws,
                 camera_pose: Optional[np.ndarray] = None,
                 cloud: Optional[DepthCloud] = None, apply_visibility: bool = False,
                 max_grasps: int = MAX_GRASPS, model_points: int = MODEL_POINTS
                 ) -> Dict[str, np.ndarray]:
    """The saved arrays of one frame (:data:`FIELDS`), the reference's rows in its order.

    Args:
        instances: the frame's objects in the order of their collision arrays.
        intrinsics: (3, 3) of the projection (GraspNet: :data:`GRASPNET_INTRINSICS`).
        image_size: (width, height) of the in-image mask.
        draws: the subsamples (:class:`FrameDraws`).
        camera_pose: GraspNet's frame camera pose (loadGrasp composes and inverts it).
        cloud: the depth image the visibility mask reads (needed with ``apply_visibility``).
        apply_visibility: keep only grasps whose reconstructed centre has a drawn depth point
            within 1 cm (the reference computes this mask but does not apply it).
        max_grasps, model_points: the reference's 5 000 and 40 000 (smaller in tests).
    """
    scene_points = scene_model_points(instances)  # drawn first, as the script draws
    scene_points = scene_points[draws.take('model_points', len(scene_points), model_points)]
    grasps = label_grasps(instances, camera_pose)
    grasps = grasps[hggd_mask(grasps)]
    if len(grasps) > max_grasps:
        grasps = grasps[draws.take('subsample', len(grasps), max_grasps)]
    if not len(grasps):
        return empty_arrays()
    grasps[:, 13:16] = refine_centres(grasps, scene_points)
    grasps = grasp_nms(grasps, NMS_TRANSLATION, NMS_ROTATION)
    arrays = encode(grasps, intrinsics)
    keep = in_image(arrays['centers_2d'], image_size)
    if apply_visibility:
        if cloud is None:
            raise ValueError('apply_visibility needs the frame\'s depth cloud')
        points = depth_points(cloud)
        points = points[draws.take('cloud', len(points), CLOUD_POINTS)]
        keep &= visible(reconstructed_centres(arrays, intrinsics), points)
    return {name: arrays[name][keep] for name in FIELDS}

