"""Scene augmentation of the reference recipes: a mirror and a tilt of the camera frame."""
import numpy as np
from mmcv.transforms import BaseTransform

from mmgrasp.registry import TRANSFORMS


def apply_matrix(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``points @ matrix.T`` for (N, 3) float32 points, as three elementwise multiply-adds in a
    fixed order: unlike a BLAS product, the result does not depend on threads or alignment."""
    m = matrix.astype(np.float32)
    return points[:, 0:1] * m[:, 0] + points[:, 1:2] * m[:, 1] + points[:, 2:3] * m[:, 2]


def apply_matrix_to_poses(matrix: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """``matrix @ pose`` for every (3, 4) pose of (M, 3, 4) float32 ``poses``, elementwise."""
    m = matrix.astype(np.float32)[None, :, :, None]  # (1, 3, 3, 1)
    return (m[:, :, 0] * poses[:, None, 0] + m[:, :, 1] * poses[:, None, 1]
            + m[:, :, 2] * poses[:, None, 2])


@TRANSFORMS.register_module()
class RandomFlipRotateScene(BaseTransform):
    """Mirror the scene in x with probability ``flip_prob``, then rotate it about the camera x-axis
    by θ ~ U(−max_rotation, max_rotation) (graspnet-baseline's ``augment_data``).

    With M = Rx(θ) · F, points become M p and poses M [R | t]; a mirrored pose has det(R) = −1.
    Label points stay in their model frames, so the poses carry the transform to them. Both draws
    are always made (flip, then angle), so the rest of the sample's stream does not depend on the
    outcome or on ``flip_prob``.

    Required Keys:

    - points (np.float32, (N, 3))
    - poses (np.float32, (M, 3, 4))
    - rng (np.random.Generator)

    Modified Keys:

    - points
    - poses

    Added Keys:

    - aug_matrix (np.float32, (3, 3)): M; ``camera_to_table`` still refers to the original camera,
      so the augmented cloud reaches the table frame through ``camera_to_table[:3, :3] @ M.T``.

    Args:
        flip_prob: probability of the x-mirror diag(−1, 1, 1).
        max_rotation: bound of the rotation angle about x, radians (reference: π/6).
    """

    def __init__(self, flip_prob: float = 0.5, max_rotation: float = np.pi / 6):
        if not 0 <= flip_prob <= 1:
            raise ValueError(f'flip_prob must be in [0, 1], got {flip_prob}')
        if max_rotation < 0:
            raise ValueError(f'max_rotation must be >= 0, got {max_rotation}')
        self.flip_prob = float(flip_prob)
        self.max_rotation = float(max_rotation)

    def transform(self, results: dict) -> dict:
        rng = results['rng']
        flip = rng.random() < self.flip_prob
        angle = rng.uniform(-self.max_rotation, self.max_rotation)
        c, s = np.cos(angle), np.sin(angle)
        rotation = np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.float64)
        mirror = np.diag([-1.0 if flip else 1.0, 1.0, 1.0])
        matrix = (rotation @ mirror).astype(np.float32)
        results['points'] = apply_matrix(matrix, results['points'])
        results['poses'] = apply_matrix_to_poses(matrix, results['poses'])
        results['aug_matrix'] = matrix
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(flip_prob={self.flip_prob}, '
                f'max_rotation={self.max_rotation})')
