"""FineGrasp's per-point normals of the sampled cloud, computed in the worker or on the device."""
from mmcv.transforms import BaseTransform

from mmgrasp.ops.normal_rule import check_rule
from mmgrasp.ops.point_normals import MAX_NN, RADIUS, estimate_normals
from mmgrasp.registry import TRANSFORMS

APPLY = ('worker', 'device')


@TRANSFORMS.register_module()
class EstimateNormals(BaseTransform):
    """The normals of the sampled camera-frame cloud by FineGrasp's rule
    (:mod:`mmgrasp.ops.point_normals`: open3d's ``estimate_normals`` with
    ``KDTreeSearchParamHybrid(radius, max_nn)``), here or in the data preprocessor.

    ``apply='worker'`` computes them now (numpy and a k-d tree: about 0.15 s of one core for
    20 000 points), the reference path. ``apply='device'`` only records the rule:
    :class:`~mmgrasp.models.data_preprocessors.GraspDataPreprocessor` computes the normals of
    the whole batch from the camera-frame clouds, before it applies the batch augmentation (on
    CUDA one kernel launch; on the CPU the worker's function, frame by frame), bit for bit the
    worker's. Either way :class:`RandomFlipRotateScene` then turns them as it turns the cloud.

    Place it after the loading transform and before the augmentation: the rule takes the cloud
    as sampled, in the camera frame. With ``apply='device'`` the augmentation must be applied
    on the device too (``RandomFlipRotateScene(apply='device')``), which it checks.

    Required Keys:

    - points (np.float32, (N, 3)): camera frame, not yet augmented

    Added Keys:

    - normals (np.float32, (N, 3)): ``apply='worker'``
    - normal_rule (dict): ``apply='device'``; the rule's settings, which PackGraspInputs puts in
      the data sample's metainfo for the preprocessor

    Args:
        radius: neighbours lie closer than this, metres.
        max_nn: at most this many neighbours, the point itself included (on CUDA at most 64).
        orientation: ``'camera'`` (every normal faces the camera) or ``'solver'`` (the sign
            open3d's eigen-solver gives: what FineGrasp's published pipeline feeds).
        scale: factor of the unit normals: 1, or 1/255 (the reference's training maps are
            stored normals divided by 255).
        apply: ``'worker'`` or ``'device'``.
    """

    def __init__(self, radius: float = RADIUS, max_nn: int = MAX_NN,
                 orientation: str = 'camera', scale: float = 1.0, apply: str = 'worker'):
        self.radius, self.max_nn, self.orientation, self.scale = check_rule(
            radius, max_nn, orientation, scale)
        if apply not in APPLY:
            raise ValueError(f"EstimateNormals: apply must be one of {APPLY}, got {apply!r}")
        self.apply = apply

    def rule(self) -> dict:
        """The rule's settings, as the preprocessor takes them."""
        return dict(radius=self.radius, max_nn=self.max_nn, orientation=self.orientation,
                    scale=self.scale)

    def transform(self, results: dict) -> dict:
        if 'aug_matrix' in results:
            raise ValueError('EstimateNormals must come before RandomFlipRotateScene: the rule '
                             'takes the camera-frame cloud as sampled')
        if self.apply == 'worker':
            results['normals'] = estimate_normals(results['points'], **self.rule())
        else:
            results['normal_rule'] = self.rule()
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(radius={self.radius}, max_nn={self.max_nn}, '
                f'orientation={self.orientation!r}, scale={self.scale}, apply={self.apply!r})')
