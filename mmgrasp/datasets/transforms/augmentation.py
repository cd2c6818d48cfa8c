"""Scene augmentation of the reference recipes: a mirror and a tilt of the camera frame."""
from typing import TypeVar

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from mmgrasp.registry import TRANSFORMS

Array = TypeVar('Array', np.ndarray, torch.Tensor)


def apply_matrix(matrix: Array, points: Array) -> Array:
    """``points @ matrix.T`` for float32 (..., N, 3) points and (..., 3, 3) matrices, numpy or
    torch, as three elementwise multiply-adds in a fixed order: unlike a BLAS product, the
    result does not depend on threads, alignment or device, so the worker (numpy, one frame)
    and GraspDataPreprocessor (torch, a batch on the device) agree bit for bit."""
    return (points[..., 0:1] * matrix[..., None, :, 0] + points[..., 1:2] * matrix[..., None, :, 1]
            + points[..., 2:3] * matrix[..., None, :, 2])


def apply_matrix_to_poses(matrix: Array, poses: Array) -> Array:
    """``matrix @ pose`` for float32 (..., 3, 4) ``poses`` and (..., 3, 3) matrices (one for all
    or one per pose), elementwise like :func:`apply_matrix`."""
    return (matrix[..., :, 0:1] * poses[..., 0:1, :] + matrix[..., :, 1:2] * poses[..., 1:2, :]
            + matrix[..., :, 2:3] * poses[..., 2:3, :])


@TRANSFORMS.register_module()
class RandomFlipRotateScene(BaseTransform):
    """Mirror the scene in x with probability ``flip_prob``, then rotate it about the camera x-axis
    by θ ~ U(−max_rotation, max_rotation) (graspnet-baseline's ``augment_data``).

    With M = Rx(θ) · F, points become M p and poses M [R | t]; a mirrored pose has det(R) = −1.
    Label points stay in their model frames, so the poses carry the transform to them. Both draws
    are always made (flip, then angle), so the rest of the sample's stream does not depend on the
    outcome or on ``flip_prob``.

    With ``apply='device'`` the matrix is drawn here, from the sample's stream, but applied by
    GraspDataPreprocessor to the whole batch on the device, with the same float32 arithmetic:
    the batch is bit-identical to ``apply='worker'``. Transforms after this one then still see
    the original cloud and poses.

    Normals (:class:`EstimateNormals`, computed on the camera-frame cloud) are directions: they
    turn with the rotation, and take the mirror only with ``flip_normals``. The default leaves
    them unmirrored, as FineGrasp's training does (its flip negates the x of the points only,
    not of ``cloud_normal``), so a mirrored sample's normals are those of the unmirrored scene.
    With ``apply='device'`` their matrix (Rx(θ), or M with ``flip_normals``) travels too, for
    normals computed in the worker or still to be computed in the preprocessor
    (``EstimateNormals(apply='device')``, which needs this device path: in the worker the cloud
    would be augmented before the preprocessor sees it).

    Required Keys:

    - points (np.float32, (N, 3))
    - poses (np.float32, (M, 3, 4))
    - rng (np.random.Generator)

    Modified Keys:

    - points (``apply='worker'`` only)
    - poses (``apply='worker'`` only)
    - normals (np.float32, (N, 3)), when present: Rx(θ) n, or M n with ``flip_normals``
      (``apply='worker'`` only)

    Added Keys:

    - aug_matrix (np.float32, (3, 3)): M; ``camera_to_table`` still refers to the original camera,
      so the augmented cloud reaches the table frame through ``camera_to_table[:3, :3] @ M.T``.
    - aug_on_device (bool): M is still to be applied (``apply='device'``); PackGraspInputs then
      packs it as ``inputs['aug_matrix']``.
    - normal_matrix (np.float32, (3, 3)): ``apply='device'`` with normals or a pending
      ``normal_rule``: the normals' matrix, packed as ``inputs['normal_matrix']``.

    Args:
        flip_prob: probability of the x-mirror diag(−1, 1, 1).
        max_rotation: bound of the rotation angle about x, radians (reference: π/6).
        apply: ``'worker'`` (here) or ``'device'`` (in GraspDataPreprocessor).
        flip_normals: mirror the normals with the points (FineGrasp does not: False).
    """

    def __init__(self, flip_prob: float = 0.5, max_rotation: float = np.pi / 6,
                 apply: str = 'worker', flip_normals: bool = False):
        if not 0 <= flip_prob <= 1:
            raise ValueError(f'flip_prob must be in [0, 1], got {flip_prob}')
        if max_rotation < 0:
            raise ValueError(f'max_rotation must be >= 0, got {max_rotation}')
        if apply not in ('worker', 'device'):
            raise ValueError(f"apply must be 'worker' or 'device', got {apply!r}")
        self.flip_prob = float(flip_prob)
        self.max_rotation = float(max_rotation)
        self.apply = apply
        self.flip_normals = bool(flip_normals)

    def transform(self, results: dict) -> dict:
        rng = results['rng']
        flip = rng.random() < self.flip_prob
        angle = rng.uniform(-self.max_rotation, self.max_rotation)
        c, s = np.cos(angle), np.sin(angle)
        rotation = np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.float64)
        mirror = np.diag([-1.0 if flip else 1.0, 1.0, 1.0])
        matrix = (rotation @ mirror).astype(np.float32)
        turn = matrix if self.flip_normals else rotation.astype(np.float32)
        if self.apply == 'worker':
            if 'normal_rule' in results:
                raise ValueError("RandomFlipRotateScene(apply='worker') after "
                                 "EstimateNormals(apply='device'): the preprocessor would "
                                 'estimate the normals of the augmented cloud; use '
                                 "apply='device' for both, or for neither")
            results['points'] = apply_matrix(matrix, results['points'])
            results['poses'] = apply_matrix_to_poses(matrix, results['poses'])
            if 'normals' in results:
                results['normals'] = apply_matrix(turn, results['normals'])
        elif 'normals' in results or 'normal_rule' in results:
            results['normal_matrix'] = turn
        results['aug_matrix'] = matrix
        results['aug_on_device'] = self.apply == 'device'
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(flip_prob={self.flip_prob}, '
                f'max_rotation={self.max_rotation}, apply={self.apply!r}, '
                f'flip_normals={self.flip_normals})')
