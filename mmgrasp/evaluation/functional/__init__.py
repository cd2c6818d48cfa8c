"""GraspNet-1Billion's per-frame evaluation protocol as array functions (numpy), usable piece
by piece, on the shared grasp geometry of :mod:`mmgrasp.geometry`.

Rules come from graspnetAPI (``graspnet_eval.py``, ``utils/eval_utils.py``), its dexnet copy
and the ``grasp_nms`` package; the code is written from those rules. Grasps are GraspGroup rows
(N, 17): score, width, height, depth, rotation (9, row-major), translation, id.

- ``grasp_nms(grasps, translation_thresh=0.03, rotation_thresh=pi/6) -> kept rows``
- ``dexnet_grasp_params(grasps, pose)``, ``grasp_friction(grasps, pose, sdf)``;
  ``grasps_friction([(grasps, pose, sdf), ...])`` (many objects and frames in one pass)
- ``precision_at_k(scores, top_k=50)``, ``evaluate_frame(grasps, models, sdfs, poses, table,
  top_k=50, per_object=10, width_range=None)``; ``evaluate_frames([frame args, ...])`` (the
  force-closure test of every frame at once)
- ``legacy_numpy_argsort`` / ``std_sort_descending``: the orders graspnetAPI's sorts give
  (:mod:`mmgrasp.geometry.sorting`; NMS and sorts live in geometry, which the label assets
  share)
"""
from .frame_eval import (EVAL_FRICTION_COEFFICIENTS, dexnet_grasp_params, evaluate_frame,
                         evaluate_frames, grasp_friction, grasps_friction, precision_at_k)
from mmgrasp.geometry.nms import grasp_nms

__all__ = ['EVAL_FRICTION_COEFFICIENTS', 'dexnet_grasp_params', 'evaluate_frame',
           'evaluate_frames', 'grasp_friction', 'grasps_friction', 'grasp_nms', 'precision_at_k']
