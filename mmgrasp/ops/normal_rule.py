"""The arithmetic of the normals rule, from a point's neighbours to its normal: open3d's
``EstimateNormals`` (``fast_normal_computation=True``, its default) operation by operation, in
float64, on numpy arrays or torch tensors alike.

Read from open3d's C++ source (isl-org/Open3D, ``cpp/open3d/utility/Eigen.cpp``
``ComputeCovariance``; ``cpp/open3d/geometry/PointCloud.cpp`` ``EstimatePerPointCovariances``;
``cpp/open3d/geometry/EstimateNormals.cpp`` ``FastEigen3x3``, ``ComputeEigenvector0/1``,
``EstimateNormals``), unchanged from 0.19 to 0.20:

- **Covariance.** Nine raw moments summed over the neighbours in the order the search returns
  them (nearest first), divided by the count, then ``E[ab] − E[a]E[b]`` (one pass, not
  mean-centred). Fewer than 3 neighbours: the identity.
- **Eigenvector** (Eberly's "robust eigensolver for 3×3 symmetric matrices"): the covariance
  is divided by its largest entry; with no off-diagonal part the axis of the smallest diagonal
  entry; else the eigenvalues ``q + p·β`` with β the roots of ``β³ − 3β = det(B)`` and the
  eigenvector of the smallest one from the cross products of the rows of ``A − λI`` (the
  largest of three, :func:`_eigenvector0`) or from a 2×2 problem in the orthogonal plane
  (:func:`_eigenvector1`), each branch as open3d takes it. A zero covariance, or a result of
  zero length, gives (0, 0, 1).
- **Sign.** The solver's: whichever cross product or 2×2 branch open3d's code reaches decides
  it (``orientation='solver'``, what ``estimate_normals`` returns). ``orientation='camera'``
  then turns every normal to face the camera at the origin, n · (−p) ≥ 0, as
  ``orient_normals_towards_camera_location()`` does.
- **Scale.** The unit normal times ``scale`` (float64), then rounded to float32.

One deliberate difference: open3d takes β from ``2 cos(acos(det/2) / 3 + 2πk/3)`` with the C
library's ``acos`` and ``cos``, whose last bits differ between libraries and devices. Here β
is the root of the same cubic found by bisection (:func:`_cubic_root`), which uses only
additions, multiplications and comparisons, so numpy, torch on any device and the Triton
kernel (:mod:`.normal_kernels`) give the same bits. The eigenvalues differ from open3d's by
about one unit in the last place; on the stored open3d golden every normal keeps open3d's
sign and the float64 normals agree to 1.2e-15 (tests/unit/ops/test_point_normals.py).

Every operation is an elementwise IEEE-754 operation (``+ − × ÷ √``, comparisons, selects)
written in a fixed order, so the result does not depend on threads, vector width or device.
"""
from typing import Tuple, Union

import numpy as np
import torch

Array = Union[np.ndarray, torch.Tensor]

ORIENTATIONS = ('camera', 'solver')
#: Bisection steps of a root in an interval of width 1: 53 halve it to one unit in the last
#: place of [1, 2]; the rest leave it there.
BISECTION_STEPS = 56


def check_rule(radius: float, max_nn: int, orientation: str, scale: float
               ) -> Tuple[float, int, str, float]:
    """The rule's settings as (float, int, str, float), or a ValueError naming the bad one."""
    if not (isinstance(radius, (int, float)) and np.isfinite(radius) and radius > 0):
        raise ValueError(f'normals: radius must be a finite number > 0 (metres), got {radius!r}')
    if isinstance(max_nn, bool) or not isinstance(max_nn, (int, np.integer)) or max_nn < 1:
        raise ValueError(f'normals: max_nn must be an integer >= 1, got {max_nn!r}')
    if orientation not in ORIENTATIONS:
        raise ValueError(f'normals: orientation={orientation!r}: expected one of '
                         f"{ORIENTATIONS} ('camera': facing the camera; 'solver': the sign "
                         "open3d's eigen-solver gives)")
    if not (isinstance(scale, (int, float)) and np.isfinite(scale) and scale > 0):
        raise ValueError(f'normals: scale must be a finite number > 0 (1, or 1/255 for the '
                         f'reference\'s stored maps), got {scale!r}')
    return float(radius), int(max_nn), orientation, float(scale)


def _xp(array: Array):
    return np if isinstance(array, np.ndarray) else torch


def _divide(x: Array, constant: float) -> Array:
    """``x / constant`` as a true division also on CUDA, where torch multiplies by the
    reciprocal of a scalar divisor (a different rounding)."""
    return x / (x * 0.0 + constant)


def _cross(u, v):
    return (u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0])


def _dot(u, v):
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]


def _pick(xp, condition, a, b):
    """Componentwise ``a if condition else b`` of two 3-vectors."""
    return tuple(xp.where(condition, a[k], b[k]) for k in range(3))


def _cubic_root(half_det: Array, low: float, high: float) -> Array:
    """The root of β³ − 3β − 2h in [low, high] (where it increases: [1, 2] or [−2, −1]), by
    bisection: the upper end after :data:`BISECTION_STEPS` steps."""
    xp = _xp(half_det)
    lo = half_det * 0.0 + low
    hi = half_det * 0.0 + high
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) * 0.5
        below = (mid * mid * mid - 3.0 * mid) - 2.0 * half_det < 0.0
        lo = xp.where(below, mid, lo)
        hi = xp.where(below, hi, mid)
    return hi


def _eigenvector0(a, value):
    """open3d's ComputeEigenvector0: the largest cross product of two rows of A − λI, unit."""
    xp = _xp(value)
    a00, a01, a02, a11, a12, a22 = a
    row0, row1, row2 = (a00 - value, a01, a02), (a01, a11 - value, a12), (a02, a12, a22 - value)
    r0xr1, r0xr2, r1xr2 = _cross(row0, row1), _cross(row0, row2), _cross(row1, row2)
    d0, d1, d2 = _dot(r0xr1, r0xr1), _dot(r0xr2, r0xr2), _dot(r1xr2, r1xr2)
    first = d1 > d0  # the first strictly larger wins, as open3d's two ifs
    last = d2 > xp.where(first, d1, d0)
    return _pick(xp, last, tuple(c / xp.sqrt(d2) for c in r1xr2),
                 _pick(xp, first, tuple(c / xp.sqrt(d1) for c in r0xr2),
                       tuple(c / xp.sqrt(d0) for c in r0xr1)))


def _eigenvector1(a, vector, value):
    """open3d's ComputeEigenvector1: the eigenvector of ``value`` in the plane orthogonal to
    ``vector``, from the 2×2 matrix of A − λI in a basis (U, V) of that plane."""
    xp = _xp(value)
    a00, a01, a02, a11, a12, a22 = a
    x, y, z = vector
    x_larger = xp.abs(x) > xp.abs(y)
    inv_xz = 1 / xp.sqrt(x * x + z * z)
    inv_yz = 1 / xp.sqrt(y * y + z * z)
    zero = x * 0.0
    u = (xp.where(x_larger, -z * inv_xz, zero), xp.where(x_larger, zero, z * inv_yz),
         xp.where(x_larger, x * inv_xz, -y * inv_yz))
    v = _cross(vector, u)

    def times_a(w):
        return (a00 * w[0] + a01 * w[1] + a02 * w[2], a01 * w[0] + a11 * w[1] + a12 * w[2],
                a02 * w[0] + a12 * w[1] + a22 * w[2])

    au, av = times_a(u), times_a(v)
    m00 = u[0] * au[0] + u[1] * au[1] + u[2] * au[2] - value
    m01 = u[0] * av[0] + u[1] * av[1] + u[2] * av[2]
    m11 = v[0] * av[0] + v[1] * av[1] + v[2] * av[2] - value
    abs00, abs01, abs11 = xp.abs(m00), xp.abs(m01), xp.abs(m11)

    def normalised(num, den):
        """open3d's ``num /= den; den = 1 / sqrt(1 + num²); num *= den`` -> (num, den)."""
        ratio = num / den
        inverse = 1 / xp.sqrt(1 + ratio * ratio)
        return ratio * inverse, inverse

    first = abs00 >= abs11  # then m00 is the pivot candidate, else m11
    # first: (m01, m00) normalised by the larger of |m00|, |m01|; the result m01·U − m00·V
    n01_a, n00_a = normalised(m01, m00)
    n00_b, n01_b = normalised(m00, m01)
    big00 = abs00 >= abs01
    c_u, c_v = xp.where(big00, n01_a, n01_b), xp.where(big00, n00_a, n00_b)
    # else: (m01, m11) normalised by the larger of |m11|, |m01|; the result m11·U − m01·V
    n01_c, n11_c = normalised(m01, m11)
    n11_d, n01_d = normalised(m11, m01)
    big11 = abs11 >= abs01
    d_u, d_v = xp.where(big11, n11_c, n11_d), xp.where(big11, n01_c, n01_d)
    coef_u, coef_v = xp.where(first, c_u, d_u), xp.where(first, c_v, d_v)
    nonzero = xp.where(first, xp.where(abs00 > abs01, abs00, abs01),
                       xp.where(abs11 > abs01, abs11, abs01)) > 0
    return _pick(xp, nonzero, tuple(coef_u * u[k] - coef_v * v[k] for k in range(3)), u)


def fast_eigen3x3(covariance) -> Tuple[Array, Array, Array]:
    """open3d's FastEigen3x3: the eigenvector of the smallest eigenvalue of the symmetric
    matrices (c00, c01, c02, c11, c12, c22), with its sign; (0, 0, 0) for a zero matrix."""
    xp = _xp(covariance[0])
    c00, c01, c02, c11, c12, c22 = covariance
    largest = c00
    for c in (c01, c02, c11, c12, c22):  # Eigen's maxCoeff over the 9 entries
        largest = xp.where(c > largest, c, largest)
    zero_matrix = largest == 0
    divisor = xp.where(zero_matrix, largest * 0.0 + 1.0, largest)
    a = tuple(c / divisor for c in covariance)
    a00, a01, a02, a11, a12, a22 = a
    norm = a01 * a01 + a02 * a02 + a12 * a12
    q = _divide(a00 + a11 + a22, 3.0)
    b00, b11, b22 = a00 - q, a11 - q, a22 - q
    p = xp.sqrt(_divide(b00 * b00 + b11 * b11 + b22 * b22 + norm * 2, 6.0))
    k00 = b11 * b22 - a12 * a12
    k01 = a01 * b22 - a12 * a02
    k02 = a01 * a12 - b11 * a02
    det = (b00 * k00 - a01 * k01 + a02 * k02) / (p * p * p)
    half_det = det * 0.5
    half_det = xp.where(half_det < -1.0, half_det * 0.0 - 1.0, half_det)  # std::max(h, -1)
    half_det = xp.where(1.0 < half_det, half_det * 0.0 + 1.0, half_det)  # std::min(h, 1)
    beta2 = _cubic_root(half_det, 1.0, 2.0)  # 2 cos(θ), θ = acos(h) / 3
    beta0 = _cubic_root(half_det, -2.0, -1.0)  # 2 cos(θ + 2π/3)
    beta1 = -(beta0 + beta2)
    eval0, eval1, eval2 = q + p * beta0, q + p * beta1, q + p * beta2
    # half_det >= 0: from the largest eigenvalue's vector (evec2), then evec1, then
    # evec1 × evec2; else from the smallest's (evec0), then evec1, then evec0 × evec1 (the
    # same operations, on the value each branch starts from)
    up = half_det >= 0
    first = _eigenvector0(a, xp.where(up, eval2, eval0))
    second = _eigenvector1(a, first, eval1)
    third = _pick(xp, up, _cross(second, first), _cross(first, second))
    first_smallest = xp.where(up, (eval2 < eval0) & (eval2 < eval1),
                              (eval0 < eval1) & (eval0 < eval2))
    general = _pick(xp, first_smallest, first,
                    _pick(xp, (eval1 < eval0) & (eval1 < eval2), second, third))
    # no off-diagonal part: the axis of the smallest diagonal entry (of A · largest, as open3d)
    d00, d11, d22 = a00 * largest, a11 * largest, a22 * largest
    x_axis = (d00 < d11) & (d00 < d22)
    y_axis = ~x_axis & (d11 < d00) & (d11 < d22)
    one, nil = q * 0.0 + 1.0, q * 0.0
    axis = (xp.where(x_axis, one, nil), xp.where(y_axis, one, nil),
            xp.where(x_axis | y_axis, nil, one))
    vector = _pick(xp, norm > 0, general, axis)
    return _pick(xp, zero_matrix, (nil, nil, nil), vector)


def rule_normals(query: Array, neighbours: Array, count: Array, orientation: str,
                 scale: float) -> Array:
    """(M, 3) float32 normals by the rule from each point's neighbours: :func:`normals64`
    rounded to float32."""
    normals = normals64(query, neighbours, count, orientation, scale)
    return normals.astype(np.float32) if isinstance(normals, np.ndarray) else \
        normals.to(torch.float32)


def normals64(query: Array, neighbours: Array, count: Array, orientation: str,
              scale: float) -> Array:
    """(M, 3) float64 normals by the rule from each point's neighbours, before the rounding.

    Args:
        query: (M, 3) float64 points.
        neighbours: (M, K, 3) float64 neighbours, nearest first (ties: lower point index);
            only the first ``count`` of a row are read.
        count: (M,) integer neighbours of each point (0..K).
        orientation: ``'camera'`` or ``'solver'``.
        scale: the factor of the unit normals.
    """
    xp = _xp(query)
    moments = [query[:, 0] * 0.0 for _ in range(9)]
    for j in range(neighbours.shape[1]):  # in the search's order, as open3d sums
        x, y, z = neighbours[:, j, 0], neighbours[:, j, 1], neighbours[:, j, 2]
        taken = j < count
        for m, term in enumerate((x, y, z, x * x, x * y, x * z, y * y, y * z, z * z)):
            moments[m] = xp.where(taken, moments[m] + term, moments[m])
    total = count * 1.0 if xp is np else count.to(query.dtype)
    total = xp.where(total > 0, total, total * 0.0 + 1.0)
    e = [m / total for m in moments]
    covariance = (e[3] - e[0] * e[0], e[4] - e[0] * e[1], e[5] - e[0] * e[2],
                  e[6] - e[1] * e[1], e[7] - e[1] * e[2], e[8] - e[2] * e[2])
    few = count < 3
    one, nil = query[:, 0] * 0.0 + 1.0, query[:, 0] * 0.0
    identity = (one, nil, nil, one, nil, one)
    covariance = tuple(xp.where(few, i, c) for i, c in zip(identity, covariance))
    if xp is np:
        with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
            normal = fast_eigen3x3(covariance)
    else:
        normal = fast_eigen3x3(covariance)
    length = xp.sqrt(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2])
    normal = _pick(xp, length == 0, (nil, nil, one), normal)  # open3d's norm() == 0 case
    if orientation == 'camera':  # flip when n · (0 − p) < 0, i.e. n · p > 0
        away = normal[0] * query[:, 0] + normal[1] * query[:, 1] + normal[2] * query[:, 2] > 0
        normal = tuple(xp.where(away, -n, n) for n in normal)
    return xp.stack([n * scale for n in normal], 1)
