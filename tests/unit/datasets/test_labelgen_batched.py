"""The torch label backend (mmgrasp.datasets.labelgen.batched) against the numpy reference, and
the exit along the jaw line through a sliver of the outside thinner than a tracing step, on both
paths."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.datasets.labelgen import model_points, object_grasp_labels
from mmgrasp.datasets.labelgen import batched
from mmgrasp.datasets.labelgen.object_labels import exit_distance, field_lipschitz
from mmgrasp.geometry import SignedDistanceField, build_gripper, read_dexnet_sdf
from _scripts import script_module

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), 'data',
                      'labelgen_golden', 'models')


@pytest.fixture(autouse=True)
def one_thread():
    """torch on one thread (on a loaded 2-core machine a second one spins), restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize('obj', ['000', '001'])
def test_torch_backend_equals_the_numpy_reference(obj):
    """Same μ, widths and self-collision, bit for bit, on the committed model files (a coarse
    grid: 30 views, 3 label points, two chunks; hundreds of feasible cells, every rejection
    step)."""
    model_dir = os.path.join(GOLDEN, obj)
    sdf = read_dexnet_sdf(os.path.join(model_dir, 'textured.sdf'))
    points = np.load(os.path.join(model_dir, 'label_points.npy'))[:3]
    gripper = build_gripper(dict(num_views=30))
    ref = object_grasp_labels(sdf, points, model_points(model_dir), gripper)
    new = object_grasp_labels(sdf, points, model_points(model_dir), gripper, backend='torch',
                              device='cpu', max_cells=3000)  # two chunks
    assert (ref['scores'] > 0).sum() > 150 and (ref['collision']).sum() > 10
    assert ((ref['scores'] == -1) & (ref['offsets'][..., 2] > 0)).sum() > 10  # no closure
    for key in ('points', 'offsets', 'collision', 'scores'):
        assert new[key].dtype == ref[key].dtype
        np.testing.assert_array_equal(new[key], ref[key], err_msg=key)


def test_backend_is_checked_and_a_grid_without_margin_refused():
    sdf = read_dexnet_sdf(os.path.join(GOLDEN, '000', 'textured.sdf'))
    with pytest.raises(ValueError, match="label backend 'cuda'"):
        object_grasp_labels(sdf, np.zeros((1, 3)), np.zeros((1, 3)), backend='cuda')
    tight = SignedDistanceField(sdf.data[2:-2], sdf.origin, sdf.resolution)
    with pytest.raises(ValueError, match='cells between the surface and its border'):
        batched.BatchedField(tight, 'cpu')


def _cracked_slab(width):
    """A slab (x from 8 to 70 mm, y and z from 8 to 22 mm, 2 mm cells) cut across x at 40 mm by
    a crack ``width`` wide: the exact signed distance on the grid, so the trilinear field along
    x is outside on [40 - width / 2, 40 + width / 2] mm exactly."""
    res = 0.002
    idx = np.stack(np.meshgrid(np.arange(40), np.arange(16), np.arange(16), indexing='ij'), -1)
    x = idx * res
    to_face = np.minimum(x - [0.008, 0.008, 0.008], [0.070, 0.022, 0.022] - x).min(-1)
    to_crack = np.abs(x[..., 0] - 0.040) - width / 2
    return SignedDistanceField(-np.minimum(to_face, to_crack), np.zeros(3), res)


def _exits(path, sdf, starts, axes, plain):
    """exit_distance on ``path``; ``plain``: the bound set to zero, which certifies every step
    (plain sphere tracing, as before the check)."""
    lip = field_lipschitz(sdf)
    if plain:
        lip = (np.zeros_like(lip[0]), np.zeros_like(lip[1]))
    if path == 'numpy':
        return exit_distance(sdf, starts, axes, 0.1, lipschitz=lip)
    field = batched.BatchedField(sdf, 'cpu')
    field.set_lipschitz(*lip)
    return batched.exit_distance(field, torch.as_tensor(starts), torch.as_tensor(axes),
                                 0.1).numpy()


@pytest.mark.parametrize('path', ['numpy', 'torch'])
def test_exit_does_not_step_over_a_thin_sliver(path):
    """A crack 0.2 mm wide (half the shortest tracing step) 6 to 22 mm ahead of the jaw
    centres: the exit is its near face, as a fine march finds it, on both paths; plain sphere
    tracing steps over it for most starts and reports the slab's far face."""
    sdf = _cracked_slab(0.0002)
    starts = np.stack([np.linspace(0.018, 0.034, 40), np.full(40, 0.015),
                       np.full(40, 0.015)], 1)
    axes = np.tile([1.0, 0.0, 0.0], (40, 1))
    t = _exits(path, sdf, starts, axes, plain=False)
    np.testing.assert_allclose(starts[:, 0] + t, 0.0399, atol=1e-6)
    plain = _exits(path, sdf, starts, axes, plain=True)
    assert (np.abs(starts[:, 0] + plain - 0.070) < 1e-6).mean() > 0.5
    # a fine march on the same field (steps of 1 micrometre) finds the crack's near face
    ts = np.arange(1, 30001) * 1e-6
    inside = sdf(sdf.to_grid(starts[:3, None] + ts[:, None] * axes[:3, None])) < 0
    np.testing.assert_allclose(ts[np.argmin(inside, 1)], t[:3], atol=2e-6)


@pytest.mark.parametrize('path', ['numpy', 'torch'])
def test_exit_on_a_whole_slab_is_unchanged_by_the_check(path):
    """No crack: the check certifies the steps and the exit is the far face on both paths,
    equal to plain sphere tracing's bit for bit where no step needed sampling."""
    sdf = _cracked_slab(-0.01)  # a negative width: no crack
    starts = np.stack([np.linspace(0.018, 0.034, 8), np.full(8, 0.015), np.full(8, 0.015)], 1)
    axes = np.tile([1.0, 0.0, 0.0], (8, 1))
    t = _exits(path, sdf, starts, axes, plain=False)
    np.testing.assert_allclose(starts[:, 0] + t, 0.070, atol=1e-6)


def test_label_backend_reaches_the_label_grids(tmp_path, monkeypatch):
    """generate_grasp_labels' --label-backend and --device, through label_mesh_file and
    generate_object, reach object_grasp_labels (and the stamp that marks an object done)."""
    from mmgrasp.datasets.labelgen import objects
    from mmgrasp.datasets.synthetic.boxes import SDF_RESOLUTION
    tool = script_module('tools/data/generate_grasp_labels.py')
    args = tool.parse_args(['m', 'o', '--label-backend', 'numpy', '--device', 'cpu'])
    assert (args.label_backend, args.device) == ('numpy', 'cpu')
    assert tool.parse_args(['m', 'o']).label_backend == 'torch'
    mesh_file = os.path.join(GOLDEN, '001', 'textured.obj')
    stamp = tool.stamp_of(mesh_file, args, build_gripper(dict(num_views=30)))
    assert stamp['label_backend'] == 'numpy'
    seen = {}

    def record(*a, **kwargs):
        seen.update(kwargs)
        raise RuntimeError('recorded')
    monkeypatch.setattr(objects, 'object_grasp_labels', record)
    with pytest.raises(RuntimeError, match='recorded'):
        objects.label_mesh_file(1, mesh_file, str(tmp_path), build_gripper(dict(num_views=30)),
                                0.02, SDF_RESOLUTION, 'numpy', 0.1, 0, True, stamp,
                                'torch', 'cpu')
    assert (seen['backend'], seen['device']) == ('torch', 'cpu')


def test_lookups_equal_the_numpy_field_in_blocks_and_at_once(monkeypatch):
    """The trilinear lookup (one gather of 8 corners from the zero-padded grid) gives the
    numpy field's values bit for bit inside the grid, the last node and the faces included,
    and the same values whether the CPU splits the points into blocks or not, and whether it
    checks on the host for points off the grid (the CPU) or not (a GPU's path, without syncs);
    a block all inside the grid skips the stand-in."""
    sdf = read_dexnet_sdf(os.path.join(GOLDEN, '000', 'textured.sdf'))
    rng = np.random.default_rng(0)
    grid = rng.uniform(-2, sdf.dims + 1, (3 * batched.LOOKUP_BLOCK + 17, 3))
    grid[:50] = np.floor(grid[:50])  # on nodes
    grid[50:60] = sdf.dims - 1  # the last node: its upper corners are dexnet's zeros
    field = batched.BatchedField(sdf, 'cpu')
    blocked = field(torch.as_tensor(grid))
    field.block = None
    np.testing.assert_array_equal(blocked.numpy(), field(torch.as_tensor(grid)).numpy())
    inside = ((grid >= 0) & (grid < sdf.dims)).all(1)
    assert inside.sum() > 50_000 and (~inside).sum() > 20_000
    np.testing.assert_array_equal(blocked.numpy()[inside], sdf(grid[inside]))
    assert (blocked.numpy()[~inside] > 0).all()  # outside the grid: outside the object
    np.testing.assert_array_equal(field(torch.as_tensor(grid[inside])).numpy(),
                                  sdf(grid[inside]))
    monkeypatch.setattr(batched, 'HOST_CHECKS', False)  # as a GPU (and the launch count)
    gpu_like = batched.BatchedField(sdf, 'cpu')
    assert field.host_checks and not gpu_like.host_checks
    np.testing.assert_array_equal(blocked.numpy(), gpu_like(torch.as_tensor(grid)).numpy())
