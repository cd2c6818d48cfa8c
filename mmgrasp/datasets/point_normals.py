"""Per-point normals of a sampled cloud: FineGrasp's second input, by one rule for training and
inference.

The rule:

- **Point set.** The sampled cloud itself (the ``num_points`` points :class:`LoadGraspScene` or
  :class:`LoadDepthImage` draw, camera frame, before augmentation), as FineGrasp's inference
  (RoboOrchardLab@241bbc6 ``models/finegrasp/processor.py``, ``get_normal``) runs open3d on its
  20 000 sampled points. Its training dataset instead loads per-pixel maps
  (``scenes/<scene>/<camera>/normal/<frame>.npy``, divided by 255) that nothing in the
  repository writes; computing on the whole masked cloud once per frame would have been the
  storable analogue, but there 30 neighbours span ~3 mm, where millimetre depth steps dominate
  (median 10° off the table plane of a synthetic frame, against 3° on the sampled cloud).
- **Neighbourhood.** open3d's ``KDTreeSearchParamHybrid(radius=0.1, max_nn=30)``: the at most
  30 nearest points, the point itself included, closer than 0.1 m. Among points at exactly the
  same distance the k-d trees choose differently (open3d's nanoflann, scipy's cKDTree here):
  on depth-image clouds, whose coordinates lie on a grid, that changes a few neighbourhoods.
- **Normal.** PCA as open3d's ``EstimateNormals``: the covariance of the neighbours about their
  mean divided by their count (open3d ``ComputeCovariance``; here in two passes, in float64),
  and its eigenvector of the smallest eigenvalue. Fewer than 3 neighbours, or a zero covariance
  (all neighbours on one spot), give (0, 0, 1) as open3d does, before the orientation below
  (so (0, 0, −1) in front of the camera); collinear neighbours have no defined normal and give
  a unit vector orthogonal to their line (the eigen-solver's choice).
- **Orientation.** open3d leaves the sign to its eigen-solver; here every normal faces the
  camera, n · (−p) ≥ 0 (open3d's ``orient_normals_towards_camera_location()`` at the origin), so
  the sign is a property of the surface and of no solver. Unit length, float32.
"""
import numpy as np
from scipy.spatial import cKDTree

RADIUS = 0.1  # metres, FineGrasp's KDTreeSearchParamHybrid(radius=0.1, max_nn=30)
MAX_NN = 30
_CHUNK = 32768  # points per query: bounds the (chunk, max_nn, 3) float64 gather to ~24 MB


def estimate_normals(points: np.ndarray, radius: float = RADIUS,
                     max_nn: int = MAX_NN) -> np.ndarray:
    """(N, 3) float32 unit normals of a camera-frame cloud by the module's rule: PCA over the
    hybrid neighbourhood (≤ ``max_nn`` nearest, closer than ``radius``), the smallest
    eigenvector, facing the camera at the origin. Deterministic: no random draw.

    Args:
        points: (N, 3) finite coordinates in metres, any float dtype (computed in float64).
        radius: neighbours lie closer than this, metres.
        max_nn: at most this many neighbours, the point itself included.
    """
    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f'estimate_normals: points must be (N, 3), got shape {points.shape}')
    if not radius > 0 or int(max_nn) < 1:
        raise ValueError(f'estimate_normals: radius must be > 0 and max_nn >= 1, got '
                         f'radius={radius}, max_nn={max_nn}')
    points = points.astype(np.float64)
    finite = np.isfinite(points).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(f'estimate_normals: point {bad} is not finite: {points[bad].tolist()}')
    normals = np.empty((len(points), 3), np.float32)
    if len(points) == 0:
        return normals
    tree = cKDTree(points)
    padded = np.concatenate([points, np.zeros((1, 3))])  # row N: cKDTree's "no neighbour"
    for start in range(0, len(points), _CHUNK):
        query = points[start:start + _CHUNK]
        # k as a list: always (m, max_nn), missing neighbours as index N (also for N < max_nn)
        _, index = tree.query(query, k=list(range(1, int(max_nn) + 1)),
                              distance_upper_bound=radius)
        normals[start:start + len(query)] = pca_normals(query, padded[index], index < len(points))
    return normals


def pca_normals(query: np.ndarray, neighbours: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(m, 3) float64 camera-facing normals of ``query`` points from their ``neighbours``
    ((m, k, 3); rows where ``valid`` ((m, k) bool) is False are ignored)."""
    count = valid.sum(axis=1)
    weight = valid[..., None].astype(np.float64)
    divisor = np.maximum(count, 1).astype(np.float64)
    mean = (neighbours * weight).sum(axis=1) / divisor[:, None]
    centred = (neighbours - mean[:, None]) * weight
    covariance = np.matmul(centred.transpose(0, 2, 1), centred) / divisor[:, None, None]
    _, vectors = np.linalg.eigh(covariance)  # eigenvalues ascending: column 0 is the smallest
    normal = vectors[:, :, 0]
    undefined = (count < 3) | ~covariance.reshape(len(query), 9).any(axis=1)
    normal[undefined] = (0.0, 0.0, 1.0)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    normal[np.einsum('ij,ij->i', normal, query) > 0] *= -1.0
    return normal
