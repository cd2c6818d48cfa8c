"""Curved and concave synthetic models: their rendering and labels against closed forms written
here from geometry (a ray meets a sphere where a quadratic says; a sphere's chord at distance d
from the centre has width 2 sqrt(r^2 - d^2) and its normals make tan(theta) = d / sqrt(r^2 - d^2)
with it), and the writer's shape and PLY-format options."""
import os

import cv2
import numpy as np
import pytest

from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.datasets.synthetic.labels import (CENTRE_MARGIN, JAW_CLEARANCE, MU_GRID,
                                               grasp_frames, shape_grasp_labels)
from mmgrasp.datasets.synthetic.shapes import SHAPES, Shape, make_shape
from mmgrasp.evaluation.scene_models import read_annotation, read_ply_points


@pytest.mark.parametrize('kind', SHAPES[1:])
def test_surface_points_lie_on_the_zero_set(kind):
    shape = make_shape(kind, np.random.default_rng(3))
    pts = shape.surface_points(0.0025)
    assert len(pts) > 100
    assert np.abs(shape.sdf(pts)).max() < 1e-9
    assert np.all(np.abs(pts) <= shape.half + 1e-9)
    # the bounding box is tight: the surface reaches each face of it
    assert np.allclose(np.abs(pts).max(0), shape.half, atol=1.5e-3)


def test_ray_depths_equal_the_sphere_quadratic():
    shape = Shape('sphere', {'r': 0.03})
    origin = np.array([0.01, -0.02, -0.4])
    dirs = np.random.default_rng(0).normal(scale=0.06, size=(500, 3)) + [0, 0, 1]
    got = shape.ray_depths(origin, dirs)
    a = (dirs ** 2).sum(1)
    b = dirs @ origin
    disc = b ** 2 - a * (origin @ origin - 0.03 ** 2)
    expected = np.where(disc > 0, (-b - np.sqrt(np.maximum(disc, 0))) / a, np.inf)
    grazing = np.abs(disc) < 1e-6 * a  # tangent rays may go either way
    assert np.isfinite(expected).sum() > 100 and (~np.isfinite(expected)).sum() > 100
    np.testing.assert_array_equal(np.isfinite(got)[~grazing], np.isfinite(expected)[~grazing])
    hit = np.isfinite(got) & np.isfinite(expected) & ~grazing
    np.testing.assert_allclose(got[hit], expected[hit], atol=1e-6)


def test_sphere_labels_equal_the_chord_formulas():
    r = 0.03
    shape = Shape('sphere', {'r': r})
    grid = (40, 6, 4)
    points = shape.surface_points(0.006)[::7]
    mu, width = shape_grasp_labels(shape, points, grid)
    rot = grasp_frames(*grid[:2])
    depths = (np.arange(grid[2]) + 1) * 0.01
    centre = points[:, None, None, None] + depths[:, None] * rot[None, :, :1, None, :, 0]
    centre, axis = np.broadcast_arrays(centre, rot[None, :, :, None, :, 1])
    dist = np.linalg.norm(centre - (centre * axis).sum(-1, keepdims=True) * axis, axis=-1)
    b = (centre * axis).sum(-1)
    half_chord = np.sqrt(np.maximum(r ** 2 - dist ** 2, 0))
    t_far, t_near = -b + half_chord, b + half_chord
    expected_width = 2 * np.maximum(t_far, t_near) + 2 * JAW_CLEARANCE
    inside = np.linalg.norm(centre, axis=-1) < r
    margins = inside & (t_far >= CENTRE_MARGIN) & (t_near >= CENTRE_MARGIN) & \
        (expected_width <= 0.1)
    tan = dist / np.maximum(half_chord, 1e-12)
    need = np.searchsorted(MU_GRID, tan - 1e-9)
    expected_mu = np.where(margins & (need < len(MU_GRID)),
                           MU_GRID[np.minimum(need, len(MU_GRID) - 1)], -1)
    near_tie = np.abs(tan[..., None] - MU_GRID).min(-1) < 1e-5
    near_margin = np.abs(np.minimum(t_far, t_near) - CENTRE_MARGIN) < 1e-5
    checked = ~near_tie & ~near_margin
    assert (mu > 0).sum() > 200 and checked.mean() > 0.99
    np.testing.assert_array_equal(mu[checked], expected_mu[checked].astype(np.float32))
    feasible = (mu > 0) & checked
    np.testing.assert_allclose(width[feasible], expected_width[feasible], atol=1e-6)


@pytest.mark.slow
def test_lshape_labels_keep_the_open_jaws_outside():
    """On the concave L a jaw line can meet the other arm: such cells are infeasible, so from
    each contact out to the open jaw the line stays outside the shape."""
    shape = make_shape('lshape', np.random.default_rng(1))
    grid = (60, 6, 3)
    points = shape.surface_points(0.004)[::5]
    mu, width = shape_grasp_labels(shape, points, grid)
    p, v, a, d = np.nonzero(mu > 0)
    assert len(p) > 100
    rot = grasp_frames(*grid[:2])[v, a]
    centre = points[p] + ((d + 1) * 0.01)[:, None] * rot[:, :, 0]
    ts = np.linspace(-0.5, 0.5, 401)[:, None, None] * width[p, v, a, d][None, :, None]
    line = centre + ts * rot[:, :, 1]
    sdf = shape.sdf(line)  # (401, n): inside around the centre, outside at both open jaws
    assert (sdf[0] > 0).all() and (sdf[-1] > 0).all()
    crossings = (np.diff(np.sign(sdf), axis=0) != 0).sum(0)
    assert (crossings == 2).all()


def test_writer_shapes_and_ply_formats(tmp_path):
    root = str(tmp_path / 'data')
    write_synthetic_dataset(root, scenes=1, frames=1, objects=3, models=4,
                            points_per_object=30, grid=(6, 3, 2), image_size=(320, 180),
                            cameras=['kinect'], progress=False,
                            shapes=('torus', 'lshape', 'box', 'capsule'),
                            ply_formats=('ascii', 'binary'))
    for m, (fmt, kind) in enumerate(zip(['ascii', 'binary'] * 2,
                                        ['torus', 'lshape', 'box', 'capsule'])):
        path = os.path.join(root, 'models', f'{m:03d}', 'nontextured.ply')
        with open(path, 'rb') as f:
            assert f.read(60).split(b'\n')[1].startswith(
                b'format ' + (b'ascii' if fmt == 'ascii' else b'binary_little_endian'))
        assert len(read_ply_points(path)) > 100
    cam = os.path.join(root, 'scenes', 'scene_0000', 'kinect')
    with open(os.path.join(cam, 'annotations', '0000.xml')) as f:
        text = f.read()
    ids = [i for i, _ in read_annotation(os.path.join(cam, 'annotations', '0000.xml'))]
    names = {0: 'torus', 1: 'lshape', 2: 'box', 3: 'capsule'}
    for i in ids:
        assert f'<obj_name>{names[i]}_{i:03d}</obj_name>' in text
    # rendered depth lies on the shapes: back-projected object pixels have |sdf| < 1 mm
    depth = cv2.imread(os.path.join(cam, 'depth', '0000.png'), cv2.IMREAD_UNCHANGED) / 1000.0
    seg = cv2.imread(os.path.join(cam, 'label', '0000.png'), cv2.IMREAD_UNCHANGED)
    K = np.load(os.path.join(cam, 'camK.npy'))
    poses = dict(read_annotation(os.path.join(cam, 'annotations', '0000.xml')))
    for obj_id in ids:
        if names[obj_id] == 'box':
            continue
        vv, uu = np.nonzero(seg == obj_id + 1)
        assert len(vv) > 30
        z = depth[vv, uu]
        cam_pts = np.stack([(uu - K[0, 2]) * z / K[0, 0], (vv - K[1, 2]) * z / K[1, 1], z], 1)
        pose = poses[obj_id].astype(np.float64)
        model_pts = (cam_pts - pose[:3, 3]) @ pose[:3, :3]
        shape = make_shape(names[obj_id], _size_rng(obj_id))
        assert np.median(np.abs(shape.sdf(model_pts))) < 1e-3


def _size_rng(model_id):
    from mmgrasp.datasets.synthetic.scene import item_rng
    return item_rng(0, 'model-size', model_id)


def test_writer_rejects_unknown_shapes_and_formats(tmp_path):
    with pytest.raises(ValueError, match='shapes must be'):
        write_synthetic_dataset(str(tmp_path / 'a'), shapes=('cube', ), progress=False)
    with pytest.raises(ValueError, match='ply_formats'):
        write_synthetic_dataset(str(tmp_path / 'b'), ply_formats=('binary_big', ),
                                progress=False)
