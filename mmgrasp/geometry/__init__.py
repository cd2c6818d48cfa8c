"""Grasp geometry shared by the datasets (synthetic labels), the models (test-time collision
filter, template views) and the evaluation: numpy/torch array functions, and compiled loops
(numba, :mod:`.compiled`) where a rule pays for every grasp-point or grasp-grasp pair (the
gripper test, nearest points, NMS); no mmgrasp imports from above this layer
(docs/advanced_guides/architecture.md).

Rules come from graspnetAPI (``utils/eval_utils.py``), its dexnet copy (``grasp.py``,
``contacts.py``, ``quality.py``, ``meshpy/sdf.py``) and graspnet-baseline's
``collision_detector.py``; the code is written from those rules. Grasps are GraspGroup rows
(N, 17): score, width, height, depth, rotation (9, row-major), translation, id.

- ``voxel_downsample(points, voxel_size) -> points`` (open3d's rule)
- ``table_points(lx=1, ly=1, lz=0.05, dx=-0.5, dy=-0.5, dz=-0.05, grid_size=0.008)``;
  ``PosedTable(to_camera).inside(lo, hi)``: the posed table points in a box, posing only those
- ``transform_points(points, T)``, ``nearest_indices(queries, points)``
- ``quaternion_to_graspnet_pose(translation, wxyz) -> float32 4x4`` (via Euler degrees)
- ``gripper_collision(grasps, points, height=0.02, depth_base=0.02, finger_width=0.01,
  empty_thresh=10) -> (collision, empty)`` for any point set; ``gripper_contacts`` -> (hit, empty)
- ``ModelFreeCollisionDetector(cloud, voxel_size).detect(grasps, approach_dist,
  collision_thresh)``; ``filter_collisions(grasps, cloud, voxel_size=0.01,
  approach_dist=0.05, collision_thresh=0.01)``; ``hggd_collision_free(grasps, cloud)`` (HGGD's
  test-time detector)
- ``SignedDistanceField(data, origin, resolution)``, ``SignedDistanceFields(fields)`` (several
  queried in one pass, each query naming its field), ``read_dexnet_sdf(path)``,
  ``parse_dexnet_sdf(path) -> (data, origin, resolution)``,
  ``write_dexnet_sdf(path, data, origin, resolution)``
- ``close_jaws(sdf, centers, axes, widths[, field]) -> (found, points (K,2,3), normals (K,2,3))``
- ``antipodal_angles(c1, n1, c2, n2)``, ``force_closure(c1, n1, c2, n2, mu)``,
  ``force_closure_min_friction(c1, n1, c2, n2, coefficients=(1.2, ..., 0.2)) -> mu or -1``;
  ``portable_min_friction`` (the same verdicts with the same bits on every CPU)
- :mod:`.portable`: ``matmul``, ``matvec``, ``dot``, ``norm``, ``transform``, ``rigid_inverse``,
  ``sin``, ``cos`` whose float64 results do not depend on the CPU, BLAS or SIMD code path (the
  synthetic datasets are computed with them)
- ``grasp_nms(grasps, translation_thresh=0.03, rotation_thresh=pi/6) -> kept rows`` (the
  ``grasp_nms`` package's rule, tie order and arithmetic; :mod:`.nms`, :mod:`.sorting`)
- ``generate_grasp_views(num_views=300)``, ``approach_to_matrix(approach, angle)`` and the
  gripper's ``GRASP_MAX_WIDTH`` / ``GRASP_HEIGHT`` (torch; :mod:`.grasp_frames`)
- ``Gripper`` (dimensions and label grid), ``GRASPNET_GRIPPER``, ``build_gripper(cfg)``,
  ``check_same_gripper`` (``GripperMismatchError``), ``read_gripper_file``,
  ``parse_gripper_options`` (a command line's ``--gripper KEY=VALUE ...``) (:mod:`.gripper`)
"""
from .collision import (ModelFreeCollisionDetector, filter_collisions, gripper_collision,
                        gripper_contacts, hggd_collision_free)
from .contacts import close_jaws
from .force_closure import (GRASPNET_FRICTION_COEFFICIENTS, antipodal_angles, force_closure,
                            force_closure_min_friction, portable_min_friction)
from .gripper import (GRASPNET_GRIPPER, Gripper, GripperMismatchError, build_gripper,
                      check_same_gripper, parse_gripper_options, read_gripper_file)
from .nms import grasp_nms
from .grasp_frames import GRASP_HEIGHT, GRASP_MAX_WIDTH, approach_to_matrix, generate_grasp_views
from .points import (PosedTable, nearest_indices, quaternion_to_graspnet_pose, table_points,
                     transform_points, voxel_downsample)
from .sdf import (SignedDistanceField, SignedDistanceFields, parse_dexnet_sdf, read_dexnet_sdf,
                  write_dexnet_sdf)

__all__ = [
    'GRASPNET_FRICTION_COEFFICIENTS', 'GRASPNET_GRIPPER', 'GRASP_HEIGHT', 'GRASP_MAX_WIDTH',
    'Gripper', 'GripperMismatchError', 'build_gripper', 'check_same_gripper',
    'parse_gripper_options', 'read_gripper_file',
    'ModelFreeCollisionDetector', 'PosedTable', 'SignedDistanceField', 'SignedDistanceFields',
    'antipodal_angles',
    'approach_to_matrix', 'close_jaws', 'filter_collisions', 'force_closure',
    'force_closure_min_friction', 'generate_grasp_views', 'gripper_collision',
    'gripper_contacts', 'grasp_nms', 'hggd_collision_free', 'nearest_indices',
    'parse_dexnet_sdf', 'portable_min_friction', 'quaternion_to_graspnet_pose',
    'read_dexnet_sdf', 'table_points', 'transform_points', 'voxel_downsample',
    'write_dexnet_sdf'
]
