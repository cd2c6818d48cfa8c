"""Grasp labels from meshes (mmgrasp.datasets.labelgen): meshes and their signed distances,
the label grids against the evaluator's own judgement and against the synthetic writer's exact
labels, the mutants those checks catch, a second gripper, and the scene files."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.datasets.labelgen import (TriangleMesh, label_points, mesh_signed_distance,
                                       model_points, object_grasp_labels, read_mesh,
                                       write_mesh_ply, write_model_files)
from mmgrasp.datasets.labelgen import batched, object_labels
from mmgrasp.datasets.labelgen.mesh import (SURFACE_DENSITY, sample_surface, surface_area,
                                            write_mesh_obj)
from mmgrasp.datasets.labelgen.object_labels import jaw_axes, label_grasps
from mmgrasp.datasets.labelgen.objects import find_meshes, save_labels
from mmgrasp.datasets.synthetic.boxes import box_signed_distance
from mmgrasp.datasets.synthetic.labels import MU_GRID
from mmgrasp.datasets.synthetic.scene import make_model, model_mesh
from mmgrasp.evaluation.functional.frame_eval import grasp_friction
from mmgrasp.geometry import (GRASPNET_GRIPPER, build_gripper, force_closure, gripper_collision,
                              read_dexnet_sdf)
from _scripts import script_module

compare_tool = script_module('tools/analysis/compare_generated_labels.py')

GRIPPER = build_gripper(dict(num_views=30))
NARROW = build_gripper(dict(num_views=30, max_width=0.08, finger_width=0.015))


@pytest.fixture(scope='module')
def generated(tmp_path_factory):
    """A box and an L of the synthetic writer as meshes, labelled through the model files
    (textured.sdf written and read back) on the writer's own label points."""
    root = str(tmp_path_factory.mktemp('labelgen'))
    out = {}
    for obj, kind in ((0, 'box'), (1, 'lshape')):
        model = make_model(0, obj, 16, kind)
        mesh = TriangleMesh(*model_mesh(model))
        model_dir = os.path.join(root, 'models', f'{obj:03d}')
        write_model_files(mesh, model_dir, sdf_backend='numpy')
        sdf = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
        labels = object_grasp_labels(sdf, model.points, model_points(model_dir), GRIPPER)
        os.makedirs(os.path.join(root, 'grasp_label'), exist_ok=True)
        save_labels(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz'), labels)
        out[kind] = dict(model=model, mesh=mesh, sdf=sdf, labels=labels, root=root,
                         model_dir=model_dir)
    return out


def label_rows(labels, gripper, cells):
    """GraspGroup rows (K, 17) of label cells (p, v, a, d): width, height, depth, rotation,
    translation, as graspnetAPI's loadGrasp builds them in the object frame."""
    rot = label_grasps(labels['points'][:0], gripper)[0]
    pi, vi, ai, di = cells.T
    rows = np.zeros((len(cells), 17))
    rows[:, 0] = 1.1 - labels['scores'][pi, vi, ai, di]
    rows[:, 1] = labels['offsets'][pi, vi, ai, di, 2]
    rows[:, 2] = gripper.height
    rows[:, 3] = gripper.depths()[di]
    rows[:, 4:13] = rot[vi, ai].reshape(-1, 9)
    rows[:, 13:16] = labels['points'][pi]
    return rows


# meshes -------------------------------------------------------------------------------------
def test_mesh_files_round_trip_and_bad_files_are_named(tmp_path):
    model = make_model(0, 1, 16, 'lshape')
    mesh = TriangleMesh(*model_mesh(model))
    write_mesh_ply(str(tmp_path / 'a.ply'), mesh)
    write_mesh_ply(str(tmp_path / 'b.ply'), mesh, binary=False)
    write_mesh_obj(str(tmp_path / 'c.obj'), mesh)
    for name in ('a.ply', 'b.ply', 'c.obj'):
        back = read_mesh(str(tmp_path / name))
        np.testing.assert_allclose(back.vertices, mesh.vertices, atol=1e-6)
        np.testing.assert_array_equal(back.faces, mesh.faces)
    (tmp_path / 'cloud.ply').write_bytes(b'ply\nformat ascii 1.0\nelement vertex 1\n'
                                         b'property float x\nproperty float y\n'
                                         b'property float z\nend_header\n0 0 0\n')
    with pytest.raises(ValueError, match='cloud.ply: no triangles'):
        read_mesh(str(tmp_path / 'cloud.ply'))
    assert find_meshes(str(tmp_path)) == {0: str(tmp_path / 'a.ply'),
                                          1: str(tmp_path / 'b.ply'),
                                          2: str(tmp_path / 'c.obj'),
                                          3: str(tmp_path / 'cloud.ply')}


def test_numpy_signed_distance_is_exact_on_the_box_and_the_l():
    rng = np.random.default_rng(0)
    for obj, kind in ((0, 'box'), (1, 'lshape')):
        model = make_model(0, obj, 16, kind)
        mesh = TriangleMesh(*model_mesh(model))
        pts = rng.uniform(-1.5 * model.half, 1.5 * model.half, (400, 3))
        exact = box_signed_distance(model.half, pts) if kind == 'box' else model.shape.sdf(pts)
        got = mesh_signed_distance(mesh, pts, 'numpy')
        np.testing.assert_array_equal(np.sign(got), np.sign(exact))
        outside = exact > 0  # the L's field (a union's minimum) is exact outside only
        np.testing.assert_allclose(got[outside], exact[outside], atol=1e-12)


def test_open3d_backend_agrees_with_the_numpy_one():
    pytest.importorskip('open3d')
    model = make_model(0, 2, 16, 'torus')
    mesh = TriangleMesh(*model_mesh(model, 0.004))
    pts = np.random.default_rng(1).uniform(-1.3 * model.half, 1.3 * model.half, (300, 3))
    np.testing.assert_allclose(mesh_signed_distance(mesh, pts, 'open3d'),
                               mesh_signed_distance(mesh, pts, 'numpy'), atol=2e-6)


def test_label_points_are_voxel_means_on_the_surface():
    model = make_model(0, 0, 16, 'box')
    mesh = TriangleMesh(*model_mesh(model))
    pts = label_points(mesh, 0.005)
    assert pts.dtype == np.float32
    assert np.abs(box_signed_distance(model.half, pts)).max() < 0.0025  # voxel means
    dense = sample_surface(mesh, int(np.ceil(surface_area(mesh) * SURFACE_DENSITY)))
    keys = np.floor((dense - (dense.min(0) - 0.0025)) / 0.005)  # open3d's voxel origin
    assert len(pts) == len(np.unique(keys, axis=0))  # one point per occupied voxel
    np.testing.assert_array_equal(pts, label_points(mesh, 0.005))  # seeded


# the evaluator's judgement ------------------------------------------------------------------
def test_files_are_graspnets_format(generated):
    root = generated['box']['root']
    with np.load(os.path.join(root, 'grasp_label', '000_labels.npz')) as z:
        assert sorted(z.files) == ['collision', 'offsets', 'points', 'scores']
        n = len(z['points'])
        assert z['offsets'].shape == (n, 30, 12, 4, 3) and z['scores'].shape == (n, 30, 12, 4)
        assert z['collision'].dtype == bool and z['scores'].dtype == np.float32
        np.testing.assert_array_equal(z['offsets'][0, 0, :, 0, 0],
                                      (np.arange(12) * np.pi / 12).astype(np.float32))
        np.testing.assert_array_equal(z['offsets'][0, 0, 0, :, 1],
                                      np.float32([0.01, 0.02, 0.03, 0.04]))
        values = set(np.unique(z['scores']).tolist())
        assert values <= {-1.0} | set(np.float32(MU_GRID).tolist()) and len(values) > 4
    for name in ('textured.obj', 'textured.sdf', 'nontextured.ply'):
        assert os.path.isfile(os.path.join(generated['box']['model_dir'], name))


@pytest.mark.parametrize('kind', ['box', 'lshape'])
def test_every_label_grasp_holds_at_its_mu_and_not_below(generated, kind):
    """The evaluator's friction step (graspnetAPI's eval_grasp: jaws closed on textured.sdf
    from the label width, antipodal test) on every feasible cell gives the label's μ: force
    closure at μ, none at μ - 0.1."""
    g = generated[kind]
    labels = g['labels']
    cells = np.argwhere(labels['scores'] > 0)
    assert len(cells) > 200
    rows = label_rows(labels, GRIPPER, cells)
    mu = labels['scores'][tuple(cells.T)].astype(np.float64)
    judged = grasp_friction(rows, np.eye(4), g['sdf'], MU_GRID)
    np.testing.assert_array_equal(np.float32(judged), np.float32(mu))
    for lower, value in zip(MU_GRID[:-1], MU_GRID[1:]):  # μ = 0.1 has no lower step
        at = np.flatnonzero(np.float32(mu) == np.float32(value))
        assert (grasp_friction(rows[at], np.eye(4), g['sdf'], [value]) == value).all()
        assert (grasp_friction(rows[at], np.eye(4), g['sdf'], [lower]) == -1).all()


@pytest.mark.parametrize('kind', ['box', 'lshape'])
def test_self_collision_is_the_evaluators_point_test(generated, kind):
    g = generated[kind]
    labels = g['labels']
    cells = np.argwhere(labels['scores'] > 0)
    hit, _ = gripper_collision(label_rows(labels, GRIPPER, cells), model_points(g['model_dir']),
                               empty_thresh=0)
    np.testing.assert_array_equal(labels['collision'][tuple(cells.T)], hit)
    assert 0 < hit.sum() < len(hit)
    assert not labels['collision'][labels['scores'] <= 0].any()


@pytest.mark.parametrize('kind', ['box', 'lshape'])
def test_labels_agree_with_the_synthetic_writer_every_difference_explained(generated, kind):
    """Same μ wherever both are feasible on the box and the L (flat faces: the fitted normals
    are exact); every other differing cell is a synthetic safety rule (edge or centre margin,
    width at the maximum) that the evaluator's physics does not have."""
    g = generated[kind]
    out = compare_tool.compare(g['model'], GRIPPER, g['labels']['scores'],
                               g['labels']['offsets'][..., 2], g['sdf'], g['model'].points)
    assert out['unexplained'] == 0, out
    assert out['differ'] == out['rule'] + out['normal'] + out['contact']
    assert out['rule'] >= 0.95 * out['differ'], out
    assert out['both_feasible'] > 0.8 * out['syn_feasible'], out


# mutants ------------------------------------------------------------------------------------
def _mutants(backend):
    """(module, name, replacement) of each mutant on ``backend``'s path: a wrong friction
    cone (the test run at twice the coefficients), a shifted depth (the jaws close 5 mm deeper
    than the cell's depth), a missing self-collision (the point test skipped)."""
    if backend == 'numpy':
        fc, grasps = object_labels.force_closure_min_friction, object_labels.label_grasps
        return dict(
            cone=(object_labels, 'force_closure_min_friction',
                  lambda c1, n1, c2, n2, mus: fc(c1, n1, c2, n2, 2 * mus) / 2),
            depth=(object_labels, 'label_grasps', lambda p, gr: (
                lambda r, c, d: (r, c + 0.005 * r[None, :, None, 0, :, 0], d))(*grasps(p, gr))),
            collision=(object_labels, 'points_collision',
                       lambda mu, *a, **k: np.zeros(mu.shape, bool)))
    mf, centres = batched.min_friction, batched.cell_centres
    return dict(
        cone=(batched, 'min_friction', lambda alpha, mus=MU_GRID: mf(alpha, 2 * mus) / 2),
        depth=(batched, 'cell_centres', lambda x, depths, p: centres(x, depths + 0.005, p)),
        collision=(batched, 'self_collision', lambda mu, *a, **k: np.zeros(mu.shape, bool)))


@pytest.fixture
def one_thread():
    """torch on one thread (on a loaded 2-core machine a second one spins), restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _mutant_labels(g, monkeypatch, backend, mutant):
    """The mutant's labels of the first 6 label points (each mutant already fails there)."""
    module, target, replacement = _mutants(backend)[mutant]
    monkeypatch.setattr(module, target, replacement)
    return object_grasp_labels(g['sdf'], g['model'].points[:6], model_points(g['model_dir']),
                               GRIPPER, backend=backend, device='cpu')


def _judged_equal(g, labels):
    cells = np.argwhere(labels['scores'] > 0)
    judged = grasp_friction(label_rows(labels, GRIPPER, cells), np.eye(4), g['sdf'], MU_GRID)
    return np.array_equal(np.float32(judged), labels['scores'][tuple(cells.T)])


@pytest.mark.parametrize('backend', ['numpy', 'torch'])
def test_mutants_fail_the_checks(generated, monkeypatch, backend, one_thread):
    g = generated['lshape']
    assert _judged_equal(g, g['labels'])
    assert not _judged_equal(g, _mutant_labels(g, monkeypatch, backend, 'cone'))
    monkeypatch.undo()
    assert not _judged_equal(g, _mutant_labels(g, monkeypatch, backend, 'depth'))
    monkeypatch.undo()
    free = _mutant_labels(g, monkeypatch, backend, 'collision')
    cells = np.argwhere(free['scores'] > 0)
    hit, _ = gripper_collision(label_rows(free, GRIPPER, cells), model_points(g['model_dir']),
                               empty_thresh=0)
    assert not np.array_equal(free['collision'][tuple(cells.T)], hit)
    monkeypatch.undo()


@pytest.mark.parametrize('backend', ['numpy', 'torch'])
def test_flipped_normals_mutant(generated, monkeypatch, backend, one_thread):
    """The antipodal test takes either orientation of a contact normal (graspnetAPI's
    use_abs_value=True), so one flipped contact normal changes no label; a flipped field (every
    normal pointing in: the SDF's sign) labels the outside and the comparison with the synthetic
    writer fails."""
    g = generated['box']
    if backend == 'numpy':  # the torch path returns the antipodal angle, not the normals
        close = object_labels.close_jaws

        def flip_first(*args, **kwargs):
            found, q, n = close(*args, **kwargs)
            n[:, 0] = -n[:, 0]
            return found, q, n
        monkeypatch.setattr(object_labels, 'close_jaws', flip_first)
        same = object_grasp_labels(g['sdf'], g['model'].points, model_points(g['model_dir']),
                                   GRIPPER)
        np.testing.assert_array_equal(same['scores'], g['labels']['scores'])
        monkeypatch.undo()
    inverted = g['sdf'].with_surface_sample(g['sdf'].surface_sample)
    inverted.data = -inverted.data
    points = g['model'].points[:6]
    labels = object_grasp_labels(inverted, points, model_points(g['model_dir']), GRIPPER,
                                 backend=backend, device='cpu')
    out = compare_tool.compare(g['model'], GRIPPER, labels['scores'],
                               labels['offsets'][..., 2], inverted, points)
    assert out['unexplained'] > 0 or out['both_feasible'] < 0.5 * out['syn_feasible'], out


# a second gripper ---------------------------------------------------------------------------
def test_a_narrower_gripper_changes_labels_and_the_evaluator_agrees(generated):
    g = generated['lshape']
    narrow = object_grasp_labels(g['sdf'], g['model'].points, model_points(g['model_dir']),
                                 NARROW)
    wide = g['labels']
    assert (narrow['offsets'][..., 2][narrow['scores'] > 0] <= 0.08).all()
    assert (wide['offsets'][..., 2][wide['scores'] > 0] > 0.08).any()
    assert (narrow['scores'] > 0).sum() < (wide['scores'] > 0).sum()
    feasible = (narrow['scores'] > 0) & (wide['scores'] > 0)
    assert (narrow['collision'][feasible] >= wide['collision'][feasible]).all()
    # the evaluator with the same gripper judges the narrow labels as they say: friction and
    # the 1.5 cm fingers against the model points
    cells = np.argwhere(narrow['scores'] > 0)
    rows = label_rows(narrow, NARROW, cells)
    judged = grasp_friction(rows, np.eye(4), g['sdf'], MU_GRID)
    np.testing.assert_array_equal(np.float32(judged), narrow['scores'][tuple(cells.T)])
    hit, _ = gripper_collision(rows, model_points(g['model_dir']), NARROW.height,
                               NARROW.base_depth, NARROW.finger_width, empty_thresh=0)
    np.testing.assert_array_equal(narrow['collision'][tuple(cells.T)], hit)
    # GraspNet's labels wider than 8 cm: the narrow evaluator clips their widths to 0.08 (its
    # protocol) and then does not find them holding at their μ; the narrow labels say -1 there
    wide_cells = np.argwhere((wide['scores'] > 0) & (wide['offsets'][..., 2] > 0.08))
    rows = label_rows(wide, GRIPPER, wide_cells)
    rows[:, 1] = np.clip(rows[:, 1], 0, NARROW.max_width)
    judged = grasp_friction(rows, np.eye(4), g['sdf'], MU_GRID)
    assert len(wide_cells) > 10
    assert (judged != wide['scores'][tuple(wide_cells.T)]).mean() > 0.5
    assert (narrow['scores'][tuple(wide_cells.T)] == -1).all()


def test_empty_and_degenerate_inputs_stay_finite(generated):
    g = generated['box']
    none = object_grasp_labels(g['sdf'], np.zeros((0, 3)), model_points(g['model_dir']),
                               GRIPPER)
    assert none['scores'].shape == (0, 30, 12, 4) and none['offsets'].shape[-1] == 3
    far = object_grasp_labels(g['sdf'], np.full((2, 3), 0.5), model_points(g['model_dir']),
                              GRIPPER)  # points nowhere near the object: nothing graspable
    assert (far['scores'] == -1).all() and np.isfinite(far['offsets']).all()
    assert not far['collision'].any()


def test_jaw_axes_are_the_evaluators():
    rot = label_grasps(np.zeros((0, 3)), GRASPNET_GRIPPER)[0]
    np.testing.assert_allclose(np.linalg.norm(jaw_axes(rot), axis=-1), 1, atol=1e-15)
    c1, n1 = np.array([[0, -0.02, 0]]), np.array([[0, -1.0, 0]])
    assert force_closure(c1, n1, -c1, -n1, 0.1)[0]
