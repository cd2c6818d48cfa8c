"""What both label backends (:mod:`.object_labels`, numpy; :mod:`.batched`, torch) share about
the jaw line: its axis as the evaluator derives it, and the bounds on how fast the trilinear
field can change along it, which let a sphere-tracing step be certified or sampled."""
from __future__ import annotations

import numpy as np

from mmgrasp.geometry import SignedDistanceField

#: samples inside a sphere-tracing step that the Lipschitz bound does not certify
SUBSTEPS = 16


def field_lipschitz(sdf: SignedDistanceField) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on the trilinear field's partial derivatives (metres per metre), per axis: over
    each grid cell and its 26 neighbours, (3, nx-1, ny-1, nz-1), and over the whole grid, (3,).
    In a cell the derivative along x is a convex mix of the cell's 4 x-edge differences (the
    same for y and z), so along a unit direction u the field changes at most
    ``sum(|u_i| * bound_i)``."""
    d = np.asarray(sdf.data, np.float64)
    near = []
    for axis in range(3):
        e = np.abs(np.diff(d, axis=axis))
        for other in range(3):
            if other != axis:
                n = e.shape[other]
                e = np.maximum(e.take(range(n - 1), other), e.take(range(1, n), other))
        e = np.pad(e / sdf.resolution * (1 + 1e-9), 1, mode='edge')  # 1e-9: its own rounding
        for other in range(3):  # the largest over the 3 x 3 x 3 block of cells around each
            n = e.shape[other]
            e = np.maximum(np.maximum(e.take(range(n - 2), other),
                                      e.take(range(1, n - 1), other)), e.take(range(2, n), other))
        near.append(e)
    near = np.stack(near)
    return near, near.reshape(3, -1).max(1)


def jaw_axes(rot: np.ndarray) -> np.ndarray:
    """Unit closing axes as the evaluator derives them (second column, divided by its norm)."""
    y = rot[..., :, 1]
    return y / np.linalg.norm(y, axis=-1, keepdims=True)
