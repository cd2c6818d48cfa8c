"""The evaluator's fast formulations against direct ones written from graspnetAPI's rules.

Each fast path (the table posed near the boxes only, voxels by one integer key, an SDF
re-sampled without recomputation) must give exactly what the direct rule gives; the gripper
test and grasp NMS are checked with the compiled loops (tests/unit/geometry/test_compiled.py).
"""
import numpy as np
from scipy.spatial.transform import Rotation

from mmgrasp.geometry import (PosedTable, SignedDistanceField, SignedDistanceFields, close_jaws,
                              table_points, transform_points, voxel_downsample)


def random_pose(seed: int) -> np.ndarray:
    rs = np.random.RandomState(seed)
    pose = np.eye(4)
    pose[:3, :3] = Rotation.random(random_state=seed).as_matrix()
    pose[:3, 3] = rs.randn(3) * 0.3
    return np.linalg.inv(pose.astype(np.float32))  # float32, as camera poses are stored


def test_posed_table_equals_posing_every_point():
    table = table_points(1.0, 1.0, 0.05, dx=-0.5, dy=-0.5, dz=-0.05, grid_size=0.008)
    rs = np.random.RandomState(0)
    sizes = []
    for seed in range(40):
        to_camera = random_pose(seed)
        every = transform_points(table, to_camera)
        posed = PosedTable(to_camera)
        for _ in range(3):
            centre = every[rs.randint(len(every))]
            lo, hi = centre - rs.rand(3) * 0.12, centre + rs.rand(3) * 0.12
            direct = every[np.all((every > lo) & (every < hi), axis=1)]
            np.testing.assert_array_equal(posed.inside(lo, hi), direct)
            sizes.append(len(direct))
    assert min(sizes) > 0 and max(sizes) > 1000  # the boxes held table points


def test_posed_table_check_catches_a_box_cut_too_tight():
    """Mutant: a negative slack drops points on the box's faces; the comparison sees it."""
    table = table_points()
    to_camera = random_pose(3)
    every = transform_points(table, to_camera)
    lo, hi = every[1000] - 0.1, every[1000] + 0.1
    direct = every[np.all((every > lo) & (every < hi), axis=1)]
    assert len(PosedTable(to_camera, slack=-0.01).inside(lo, hi)) < len(direct)


def test_voxel_keys_equal_row_keys():
    rs = np.random.RandomState(2)
    for points, size in [(rs.rand(5000, 3) * 0.3, 0.008), (rs.randn(3000, 3), 0.05),
                         (rs.rand(50, 3) * 1e12, 1e-6)]:  # the last: too many voxels for a key
        bound = points.min(axis=0) - size / 2
        index = np.floor((points - bound) / size).astype(np.int64)
        voxels, inverse = np.unique(index, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        expected = np.stack([np.bincount(inverse, weights=points[:, d]) for d in range(3)], 1)
        expected /= np.bincount(inverse)[:, None]
        np.testing.assert_array_equal(voxel_downsample(points, size), expected)


def test_sdf_with_surface_sample_equals_a_new_field():
    grid = np.stack(np.meshgrid(*[np.arange(12.0)] * 3, indexing='ij'), -1)
    data = (np.linalg.norm(grid - 5.5, axis=-1) - 4.0) * 0.01
    field = SignedDistanceField(data, np.zeros(3), 0.01)
    sample = field.surface_cells[::7]
    resampled = field.with_surface_sample(sample)
    fresh = SignedDistanceField(data, np.zeros(3), 0.01, sample)
    queries = np.array([[-3.0, 2.0, 5.0], [20.0, 5.5, 5.5], [5.5, 5.5, 5.5], [14.0, -2.0, 30.0]])
    np.testing.assert_array_equal(resampled(queries), fresh(queries))
    assert not np.array_equal(field(queries), resampled(queries))  # the sample matters outside
    assert field.surface_sample is field.surface_cells  # the original field is unchanged


def trilinear_direct(data: np.ndarray, point) -> float:
    """dexnet's Sdf3D._signed_distance inside the grid, one point: corners in its order."""
    dims = np.array(data.shape)
    c = np.minimum(np.asarray(point, dtype=np.float64), dims - 1)
    base = np.floor(c).astype(np.int64)
    total = 0.0
    for offset in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 0, 1),
                   (1, 1, 1)]:
        corner = base + offset
        value = float(data[tuple(corner)]) if np.all(corner < dims) else 0.0
        w = -np.abs(corner - c) + 1
        total = total + float(w[0] * w[1] * w[2]) * value
    return total


def test_sdf_trilinear_equals_dexnet_point_by_point():
    rs = np.random.RandomState(4)
    data = rs.randn(7, 5, 6) * 0.01
    field = SignedDistanceField(np.asfortranarray(data), np.zeros(3), 0.01)  # any memory order
    dims = np.array(data.shape)
    points = np.concatenate([rs.rand(300, 3) * (dims - 1),       # inside
                             np.floor(rs.rand(20, 3) * dims),    # on grid nodes
                             dims - 1 - rs.rand(20, 3) * 1e-9,   # against the last cells
                             np.tile(dims - 1.0, (3, 1))])
    expected = np.array([trilinear_direct(data, p) for p in points])
    np.testing.assert_array_equal(field(points), expected)


def _curved_field(n, res, radius, seed):
    """A sphere-like field (curved along lines, as dexnet's contact search needs), its own
    grid size, resolution and origin, roughened so no two fields share values."""
    dims = np.array([n, n + 3, n - 2])
    origin = -(dims - 1) / 2 * res + np.random.RandomState(seed).rand(3) * res
    grid = np.stack(np.meshgrid(*[np.arange(d) for d in dims], indexing='ij'), -1) * res + origin
    data = (np.sum(grid ** 2, -1) - radius ** 2) / (2 * radius)
    data += np.random.RandomState(seed).rand(*dims) * 1e-4
    return SignedDistanceField(data, origin, res,
                               surface_sample=None if seed % 2 else
                               np.argwhere(np.abs(data) < res * 0.7)[::5])


def test_stacked_fields_equal_each_field_alone():
    """SignedDistanceFields (the evaluation's one pass over many objects' SDFs) gives, per
    query, the bits its field alone gives: values inside and outside the grid, normals, and
    the jaws closed on it (close_jaws with ``field``)."""
    fields = [_curved_field(31, 0.002, 0.025, 0), _curved_field(24, 0.0025, 0.02, 1),
              _curved_field(40, 0.0015, 0.022, 2)]
    stack = SignedDistanceFields(fields)
    rs = np.random.RandomState(5)
    field = rs.randint(3, size=600)
    grid = rs.rand(600, 3) * (stack.dims[field] + 6) - 3  # some queries off the grid
    values = stack(grid, field)
    normal, valid = stack.surface_normal(grid, field)
    for f, sdf in enumerate(fields):
        rows = field == f
        np.testing.assert_array_equal(values[rows], sdf(grid[rows]))
        n1, v1 = sdf.surface_normal(grid[rows])
        np.testing.assert_array_equal(valid[rows], v1)
        np.testing.assert_array_equal(normal[rows], n1)
        assert v1.any()
    points = rs.randn(600, 3) * 0.02
    np.testing.assert_array_equal(stack.to_object(stack.to_grid(points, field), field),
                                  np.array([fields[f].to_object(fields[f].to_grid(p))
                                            for p, f in zip(points, field)]))
    axes = rs.randn(300, 3)
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    centres, widths, owner = rs.randn(300, 3) * 0.01, 0.03 + rs.rand(300) * 0.07, field[:300]
    found, pts, normals = close_jaws(stack, centres, axes, widths, field=owner)
    assert 50 < found.sum() < 300
    for f, sdf in enumerate(fields):
        rows = owner == f
        alone = close_jaws(sdf, centres[rows], axes[rows], widths[rows])
        for got, want in zip((found[rows], pts[rows], normals[rows]), alone):
            np.testing.assert_array_equal(got, want)
    # mutant: a grid read from the wrong place in the flat array is caught
    stack.start[1:] += 1
    assert not np.array_equal(stack(grid, field), values)
