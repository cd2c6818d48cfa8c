"""EconomicAssigner: EconomicGrasp's label assignment (``process_grasp_labels`` of
iSEE-Laboratory/EconomicGrasp ``utils/label_generation.py`` @7361bb6), reading the economic rows
of the matched label points only (deferred), or from whole per-scene arrays (dense reference).

Interface (the reference's own names, shapes and dtypes; B frames, M = 1024 seeds, V = 300
template views, K = top-k views kept by the asset, 300 by default):

Inputs of :meth:`EconomicAssigner.assign`:
    seed_xyz: (B, M, 3) float32, ``end_points['xyz_graspable']`` (camera frame, after the flip).
    top_view_inds: (B, M) int64, ``end_points['grasp_top_view_inds']`` (template view chosen by
        the view head: multinomial in training).
    labels: :class:`~mmgrasp.structures.economic_labels.EconomicLabelBatch` (from the batch's
        data samples: poses, label points, and the economic rows dense or deferred).

Output: a dict with exactly the reference keys (``end_points`` after ``process_grasp_labels``)
plus the returned rotation under ``batch_grasp_view_rot``:
    batch_grasp_view_rot:       (B, M, 3, 3) float32 gripper rotation of the chosen template
                                view (the first return value of the reference function, which
                                the cylinder grouping consumes in training).
    batch_grasp_point:          (B, M, 3) float32 nearest label point, camera frame.
    batch_grasp_view_graspness: (B, M, V) float32 view graspness re-indexed to template views.
    batch_grasp_rotations:      (B, M) int32 in-plane angle class 0..A-1; 12 when unmatched.
    batch_grasp_depth:          (B, M) int32 depth class 0..D-1; 4 when unmatched.
    batch_grasp_score:          (B, M) float32 score 1.1 − μ as stored (uint8 / 10); 0 unmatched.
    batch_grasp_width:          (B, M) float32 metres (uint8 / 1000); 0.1 when unmatched.
    batch_valid_mask:           (B, M) bool: nearest label point within 5 mm AND the chosen
                                view is among the point's stored top-K views.
    C: Valid Points:            () float32, seeds within 5 mm per frame (the reference's log).

Per-point targets (``objectness_label`` (B, N) int64, ``graspness_label`` (B, N) float32) are
not the assigner's: they come from the data sample as for GSNet.
"""
