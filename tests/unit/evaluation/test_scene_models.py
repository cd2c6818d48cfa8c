"""Model files as graspnetAPI's open3d reader sees them: ASCII PLY values are doubles parsed from
their text, binary ``float`` values are float32 widened."""
import os

import numpy as np
import pytest
from plyfile import PlyData, PlyElement

from mmgrasp.evaluation import scene_models
from mmgrasp.geometry import voxel_downsample


def _write_ply(path, pts, text, face_first=False):
    vertex = np.array([tuple(p) + (1.0, ) for p in pts],
                      dtype=[('x', 'f4'), ('y', 'f4'), ('z', 'f4'), ('nx', 'f4')])
    face = np.array([([0, 1, 2], )], dtype=[('vertex_indices', 'i4', (3, ))])
    elements = [PlyElement.describe(vertex, 'vertex'), PlyElement.describe(face, 'face')]
    PlyData(elements[::-1] if face_first else elements, text=text).write(path)


def _ascii_values(path, skip=0):
    """The vertex values as Python parses their text (correctly rounded, as strtod), from the
    line after ``skip`` lines of other elements; up to the next element (a face: 3 i j k)."""
    with open(path) as f:
        lines = f.read().split('end_header\n', 1)[1].splitlines()[skip:]
    return np.array([[float(v) for v in line.split()[:3]] for line in lines
                     if line.split()[0] != '3'])


@pytest.mark.parametrize('face_first', [False, True])
def test_ascii_values_are_parsed_as_doubles(tmp_path, face_first):
    pts = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    path = str(tmp_path / 'm.ply')
    _write_ply(path, pts, text=True, face_first=face_first)
    out = scene_models.read_ply_points(path)
    assert out.dtype == np.float64 and out.shape == (50, 3)
    np.testing.assert_array_equal(out, _ascii_values(path, skip=int(face_first)))


def test_binary_floats_are_float32_widened(tmp_path):
    pts = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    path = str(tmp_path / 'm.ply')
    _write_ply(path, pts, text=False)
    out = scene_models.read_ply_points(path)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, pts.astype(np.float64))


def test_ascii_tokens_ignore_line_breaks(tmp_path):
    """rply reads whitespace-separated tokens: a row split over lines reads the same."""
    path = str(tmp_path / 'm.ply')
    with open(path, 'w') as f:
        f.write('ply\nformat ascii 1.0\ncomment x\nelement vertex 2\nproperty float x\n'
                'property float y\nproperty float z\nend_header\n0.008 0.016\n-0.024\n1e-3 2 3\n')
    np.testing.assert_array_equal(scene_models.read_ply_points(path),
                                  [[0.008, 0.016, -0.024], [0.001, 2.0, 3.0]])


def test_voxel_boundary_points_stay_in_their_voxel(tmp_path):
    """A 1 mm grid written with 6 decimals (as the synthetic writer writes models) has points on
    8 mm voxel boundaries; a float32 parse moves some of them to the next voxel."""
    ax = np.round(np.arange(-20, 21) * 0.001, 3)
    grid = np.stack(np.meshgrid(ax, ax, [0.0], indexing='ij'), -1).reshape(-1, 3)
    path = str(tmp_path / 'grid.ply')
    with open(path, 'w') as f:
        f.write(f'ply\nformat ascii 1.0\nelement vertex {len(grid)}\nproperty float x\n'
                'property float y\nproperty float z\nend_header\n')
        f.writelines(f'{x:.6f} {y:.6f} {z:.6f}\n' for x, y, z in grid)
    doubles = _ascii_values(path)
    expected = voxel_downsample(doubles, 0.008)
    rounded = voxel_downsample(doubles.astype(np.float32).astype(np.float64), 0.008)
    assert not np.array_equal(rounded, expected)  # the float32 parse would be caught
    np.testing.assert_array_equal(voxel_downsample(scene_models.read_ply_points(path), 0.008),
                                  expected)


@pytest.mark.parametrize('text', [True, False])
def test_truncated_or_broken_files_name_the_file(tmp_path, text):
    path = str(tmp_path / 'm.ply')
    _write_ply(path, np.zeros((50, 3), np.float32), text=text)
    with open(path, 'rb') as f:
        head = f.read(200)
    with open(path, 'wb') as f:
        f.write(head)  # truncated
    with pytest.raises(ValueError, match='m.ply'):
        scene_models.read_ply_points(path)
    with open(path, 'w') as f:
        f.write('ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n'
                'end_header\n1 2\n')
    with pytest.raises(ValueError, match='m.ply.*lack x, y or z'):
        scene_models.read_ply_points(path)


def _write_points(path, points):
    vertex = np.array([tuple(p) for p in points], dtype=[('x', 'f4'), ('y', 'f4'), ('z', 'f4')])
    PlyData([PlyElement.describe(vertex, 'vertex')]).write(str(path))


def test_a_model_rewritten_under_the_same_path_is_parsed_again(tmp_path):
    """The in-process cache is keyed by path, size and modification time: a rewritten model
    file (same path, even the same size) is never served from the old parse."""
    from mmgrasp.geometry import write_dexnet_sdf
    ply, sdf = tmp_path / 'nontextured.ply', tmp_path / 'textured.sdf'
    first, second = np.zeros((1, 3), np.float32), np.full((1, 3), 0.5, np.float32)
    _write_points(ply, first)
    write_dexnet_sdf(str(sdf), np.arange(8.).reshape(2, 2, 2) * 1e-3 - 3.5e-3, np.zeros(3), 0.01)
    assert np.array_equal(scene_models.cached_model_points(str(ply)), first)
    assert float(scene_models.cached_sdf(str(sdf)).data.max()) == pytest.approx(3.5e-3)
    size = (ply.stat().st_size, sdf.stat().st_size)
    _write_points(ply, second)
    write_dexnet_sdf(str(sdf), np.arange(8.).reshape(2, 2, 2) * 2e-3 - 7e-3, np.zeros(3), 0.01)
    for path in (ply, sdf):  # a later modification time, whatever the clock's granularity
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10 ** 9))
    assert (ply.stat().st_size, sdf.stat().st_size) == size  # same size: only mtime tells
    assert np.array_equal(scene_models.cached_model_points(str(ply)), second)
    assert float(scene_models.cached_sdf(str(sdf)).data.max()) == pytest.approx(7e-3)
