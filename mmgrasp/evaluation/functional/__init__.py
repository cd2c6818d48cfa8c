"""GraspNet-1Billion's evaluation rules as array functions (numpy), usable piece by piece.

Rules come from graspnetAPI (``graspnet_eval.py``, ``utils/eval_utils.py``), its dexnet copy
(``grasp.py``, ``contacts.py``, ``quality.py``, ``meshpy/sdf.py``), the ``grasp_nms`` package and
graspnet-baseline's ``collision_detector.py``; the code is written from those rules. Grasps are
GraspGroup rows (N, 17): score, width, height, depth, rotation (9, row-major), translation, id.

- ``grasp_nms(grasps, translation_thresh=0.03, rotation_thresh=pi/6) -> kept rows``
- ``voxel_downsample(points, voxel_size) -> points`` (open3d's rule)
- ``table_points(lx=1, ly=1, lz=0.05, dx=-0.5, dy=-0.5, dz=-0.05, grid_size=0.008)``;
  ``PosedTable(to_camera).inside(lo, hi)``: the posed table points in a box, posing only those
- ``transform_points(points, T)``, ``nearest_indices(queries, points)``
- ``quaternion_to_graspnet_pose(translation, wxyz) -> float32 4x4`` (via Euler degrees)
- ``gripper_collision(grasps, points, height=0.02, depth_base=0.02, finger_width=0.01,
  empty_thresh=10) -> (collision, empty)`` for any point set; ``gripper_contacts`` -> (hit, empty)
- ``ModelFreeCollisionDetector(cloud, voxel_size).detect(grasps, approach_dist,
  collision_thresh)``; ``filter_collisions(grasps, cloud, voxel_size=0.01,
  approach_dist=0.05, collision_thresh=0.01)``
- ``SignedDistanceField(data, origin, resolution)``, ``read_dexnet_sdf(path)``,
  ``parse_dexnet_sdf(path) -> (data, origin, resolution)``,
  ``write_dexnet_sdf(path, data, origin, resolution)``
- ``close_jaws(sdf, centers, axes, widths) -> (found, points (K,2,3), normals (K,2,3))``
- ``antipodal_angles(c1, n1, c2, n2)``, ``force_closure(c1, n1, c2, n2, mu)``,
  ``force_closure_min_friction(c1, n1, c2, n2, coefficients=(1.2, ..., 0.2)) -> mu or -1``
- ``dexnet_grasp_params(grasps, pose)``, ``grasp_friction(grasps, pose, sdf)``
- ``precision_at_k(scores, top_k=50)``, ``evaluate_frame(grasps, models, sdfs, poses, table,
  top_k=50, per_object=10, width_range=None)``
"""
from .contacts import close_jaws
from .force_closure import (GRASPNET_FRICTION_COEFFICIENTS, antipodal_angles, force_closure,
                            force_closure_min_friction)
from .frame_eval import (EVAL_FRICTION_COEFFICIENTS, dexnet_grasp_params, evaluate_frame,
                         grasp_friction, precision_at_k)
from .gripper import (ModelFreeCollisionDetector, filter_collisions, gripper_collision,
                      gripper_contacts)
from .nms import grasp_nms
from .points import (PosedTable, nearest_indices, quaternion_to_graspnet_pose, table_points,
                     transform_points, voxel_downsample)
from .sdf import SignedDistanceField, parse_dexnet_sdf, read_dexnet_sdf, write_dexnet_sdf

__all__ = [
    'EVAL_FRICTION_COEFFICIENTS', 'GRASPNET_FRICTION_COEFFICIENTS', 'ModelFreeCollisionDetector',
    'PosedTable', 'SignedDistanceField', 'antipodal_angles', 'close_jaws', 'dexnet_grasp_params',
    'evaluate_frame', 'filter_collisions', 'force_closure', 'force_closure_min_friction',
    'grasp_friction', 'grasp_nms', 'gripper_collision', 'gripper_contacts', 'nearest_indices', 'parse_dexnet_sdf',
    'precision_at_k', 'quaternion_to_graspnet_pose', 'read_dexnet_sdf', 'table_points',
    'transform_points', 'voxel_downsample', 'write_dexnet_sdf'
]
