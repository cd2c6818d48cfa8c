"""The normals kernel gives the numpy rule's bits, run on CPU tensors by Triton's interpreter:
ties at the last place, more copies of a point than the kernel has slots (its bracket split
down to a single distance), isolated points, fewer points than max_nn, frames whose size is no
multiple of a program's queries, both orientations and both scales."""
import os
import sys

import numpy as np
import pytest
import torch

# read when triton's own and our kernels are decorated: it must be set before triton is imported
_INTERPRETED = 'triton' not in sys.modules and not torch.cuda.is_available()
if _INTERPRETED:
    os.environ['TRITON_INTERPRET'] = '1'
triton = pytest.importorskip('triton')

from mmgrasp.ops import normal_kernels  # noqa: E402
from mmgrasp.ops.normal_rule import BISECTION_STEPS  # noqa: E402
from mmgrasp.ops.point_normals import estimate_normals  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not _INTERPRETED, reason='triton was imported for the GPU before this module')]


def cloud(seed: int, copies: int, n: int) -> np.ndarray:
    """``copies`` of one point, a 4 mm grid (equal distances), two isolated points and a
    random patch, shuffled: (n, 3) float32."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(5), np.arange(5), [0]), -1).reshape(-1, 3) * 0.004
    parts = [np.repeat([[0.05, 0.0, 0.6]], copies, axis=0), grid + [0.0, 0.0, 0.62],
             [[0.9, 0.9, 1.0], [-0.9, 0.9, 1.0]]]
    used = sum(len(p) for p in parts)
    parts.append(rng.normal([0.02, 0.0, 0.61], 0.01, (n - used, 3)))
    return np.concatenate(parts).astype(np.float32)[rng.permutation(n)]


def expected(frames: np.ndarray, max_nn: int, orientation: str, scale: float) -> np.ndarray:
    return np.stack([estimate_normals(f, 0.1, max_nn, orientation, scale) for f in frames])


@pytest.mark.parametrize('orientation,scale', [('solver', 1.0), ('camera', 1 / 255)])
def test_the_kernel_gives_the_rules_bits(orientation, scale):
    frames = np.stack([cloud(0, 12, 45), cloud(1, 3, 45)])  # 45: three programs, the last short
    got = normal_kernels.estimate_normals(torch.from_numpy(frames), 0.1, 30, orientation, scale)
    assert got.numpy().tobytes() == expected(frames, 30, orientation, scale).tobytes()
    few = frames[:, :7]  # fewer points than max_nn
    got = normal_kernels.estimate_normals(torch.from_numpy(few), 0.1, 30, orientation, scale)
    assert got.numpy().tobytes() == expected(few, 30, orientation, scale).tobytes()


def test_more_ties_than_slots_split_the_bracket_to_one_distance():
    """With 8 slots and 6 neighbours, 20 copies of a point (and the grid's equal distances)
    leave more candidates below every threshold than slots: the bracket is split down to one
    distance, and the lowest indices at it are taken."""
    frames = torch.from_numpy(np.stack([cloud(2, 20, 48)]))
    out = torch.empty_like(frames)
    slots = torch.empty(48 * 8, dtype=torch.int32)
    params = torch.tensor([0.1 * 0.1, 1.0], dtype=torch.float64)  # radius², scale
    normal_kernels._normals_kernel[(3, )](frames, params, slots, out, 48, 6, 0, BQ=16, BR=8,
                                          S=8, CAP=8, STEPS=BISECTION_STEPS)
    assert out.numpy().tobytes() == expected(frames.numpy(), 6, 'solver', 1.0).tobytes()


def test_a_larger_neighbourhood_than_the_slots_is_refused():
    with pytest.raises(ValueError, match='max_nn <= 64'):
        normal_kernels.estimate_normals(torch.zeros(1, 4, 3), 0.1, 65, 'camera', 1.0)
