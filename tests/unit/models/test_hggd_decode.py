"""HGGD's test-time path against the reference functions (tests/data/hggd_golden/*.npz, made
by tools/analysis/golden/make_hggd_golden.py from THU-VCLab/HGGD@69580ff) and numpy
implementations written from the rules, with mutants that must fail: heatmap blur, grid-based
centres and the greedy 2-D NMS, lifting, ball radius, the 6-D decode, the collision filter,
the anchor shift."""
import math
import os
import sys

import numpy as np
import pytest
import torch

from mmgrasp.geometry.collision import hggd_collision_free
from mmgrasp.models.utils.hggd_anchors import HGGDAnchors, initial_anchors
from mmgrasp.models.utils.hggd_centers import (Centers, ball_radius, gaussian_blur,
                                               lift_centers, process_outputs, select_centers)
from mmgrasp.models.utils.hggd_grasps import decode_grasps

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GOLDEN = os.path.join(REPO, 'tests', 'data', 'hggd_golden')
REALSENSE = torch.tensor([[927.17, 0, 651.32], [0, 927.37, 349.62], [0, 0, 1]],
                         dtype=torch.float64)


def golden(name: str):
    return np.load(os.path.join(GOLDEN, f'{name}.npz'))


def golden_maps(g) -> dict:
    return process_outputs({'loc_map': torch.from_numpy(g['loc_logits']),
                            **{f'{k}_{s}': torch.from_numpy(g[f'{n}_logits']) for k, s, n in (
                                ('cls', 'mask', 'cls'), ('theta', 'offset', 'theta'),
                                ('depth', 'offset', 'depth'), ('width', 'offset', 'width'))}})


# ---- numpy, from the rules ----

def np_blur(image, kernel=9, sigma=10.0, mode='reflect'):
    half = (kernel - 1) / 2
    g = np.exp(-0.5 * (np.linspace(-half, half, kernel) / sigma) ** 2)
    g /= g.sum()
    padded = np.pad(image, kernel // 2, mode=mode)
    out = np.zeros_like(image, dtype=np.float64)
    for i in range(kernel):
        for j in range(kernel):
            out += g[i] * g[j] * padded[i:i + image.shape[0], j:j + image.shape[1]]
    return out


def np_centers(heat, cls, dtheta, num, thres, grid=8, last_row_quirk=True, angle_rule=True):
    """Grid sampling + greedy NMS: best cells (stable), argmax in the cell widened by 1 px
    (window clipped to [0, X-1) x [0, Y-1)), heat > thres, top θ anchor (last of equal ones),
    drop within 8 px and 30° of a kept one."""
    X, Y = heat.shape
    cells = heat[:X // grid * grid, :Y // grid * grid].reshape(X // grid, grid, Y // grid,
                                                            grid).max(axis=(1, 3)).ravel()
    order = np.argsort(-cells, kind='stable')[:10 * num]
    kept = []
    hi_x, hi_y = (X - 1, Y - 1) if last_row_quirk else (X, Y)
    for cell in order:
        r, c = divmod(cell, Y // grid)
        x0, x1 = max(0, r * grid - 1), min(r * grid + grid + 1, hi_x)
        y0, y1 = max(0, c * grid - 1), min(c * grid + grid + 1, hi_y)
        window = heat[x0:x1, y0:y1]
        a = np.argmax(window)
        x, y = x0 + a // window.shape[1], y0 + a % window.shape[1]
        if heat[x, y] <= thres:
            continue
        scores = cls[:, x // grid, y // grid]
        k = len(scores) - 1 - np.argmax(scores[::-1])
        theta = math.pi / 6 * (k + dtheta[k, x // grid, y // grid] + 0.5) - math.pi / 2
        if len(kept) >= num:
            break
        blocked = False
        for kx, ky, kt in kept:
            turn = abs(kt - theta)
            near = math.hypot(kx - x, ky - y) < grid
            if near and (min(math.pi - turn, turn) < math.pi / 6 or not angle_rule):
                blocked = True
        if not blocked:
            kept.append((x, y, theta))
    return np.array(kept).reshape(-1, 3)


# ---- blur and 2-D centres ----

def test_blur_equals_torchvision_and_numpy():
    g = golden('decode_2d')
    maps = golden_maps(g)
    np.testing.assert_array_equal(maps['heat'][0].numpy(), g['blurred'])  # torchvision's values
    image = torch.rand(1, 1, 30, 17, dtype=torch.float64)
    ours = gaussian_blur(image)[0, 0].numpy()
    np.testing.assert_allclose(ours, np_blur(image[0, 0].numpy()), atol=1e-14)
    assert np.abs(ours - np_blur(image[0, 0].numpy(), mode='constant')).max() > 1e-3


@pytest.mark.parametrize('name,num,thres', [('test', 48, 0.01), ('train', 128, 0.0),
                                            ('few', 8, 0.3)])
def test_centers_equal_the_reference(name, num, thres):
    g = golden('decode_2d')
    c = select_centers(golden_maps(g), num, thres)
    np.testing.assert_array_equal(torch.stack([c.x, c.y], 1).numpy(), g[f'{name}_centers'])
    np.testing.assert_array_equal(c.theta.numpy(), g[f'{name}_thetas'])
    np.testing.assert_array_equal(c.score.double().numpy(), g[f'{name}_scores'])
    # the reference's numba code computes these in float64 from float32 offsets; the golden
    # ran its code without numba, where numpy keeps float32: equal to float32 rounding
    np.testing.assert_allclose(c.width.numpy(), g[f'{name}_widths'], rtol=3e-7)
    np.testing.assert_allclose(c.depth_offset.numpy(), g[f'{name}_depths'], rtol=0, atol=1e-6)
    assert (c.host_frame == 0).all() and len(c) == len(g[f'{name}_centers'])


def test_centers_equal_numpy_and_mutants_differ():
    rng = np.random.default_rng(0)
    logits = torch.from_numpy(rng.normal(0, 2, (2, 1, 64, 40)).astype(np.float32))
    logits[1, 0, 63, :] = 12  # the last row: never chosen
    maps = process_outputs({'loc_map': logits,
                            **{k: torch.randn(2, 6, 8, 5) for k in (
                                'cls_mask', 'theta_offset', 'depth_offset', 'width_offset')}})
    c = select_centers(maps, 12, 0.2)
    for b in range(2):
        expected = np_centers(maps['heat'][b].numpy(), maps['cls'][b].numpy(),
                              maps['theta'][b].numpy(), 12, 0.2)
        mine = c.frame == b
        ours = torch.stack([c.x[mine].double(), c.y[mine].double(), c.theta[mine]], 1).numpy()
        np.testing.assert_allclose(ours, expected, atol=1e-6)
        for mutant in (dict(last_row_quirk=False), dict(angle_rule=False)):
            wrong = np_centers(maps['heat'][b].numpy(), maps['cls'][b].numpy(),
                               maps['theta'][b].numpy(), 12, 0.2, **mutant)
            if b == 1 or mutant.get('angle_rule') is False:
                assert wrong.shape != expected.shape or not np.allclose(wrong, expected), mutant
    assert (c.x < 63).all() and (c.y < 39).all()
    assert np.all(np.diff(c.host_frame) >= 0) and len(c) <= 24


# ---- lifting ----

def golden_depth() -> torch.Tensor:
    sys.path.insert(0, os.path.join(REPO, 'tools', 'analysis', 'golden'))
    from make_hggd_golden import depth_image
    sys.path.pop(0)
    depth = torch.from_numpy(depth_image())
    depth[60:70, 115:125] = 0
    depth[118:124, 236:244] = 0
    return depth


def golden_centers(g) -> Centers:
    n = len(g['centers'])
    t = torch.from_numpy
    return Centers(frame=torch.zeros(n, dtype=torch.long), x=t(g['centers'][:, 0]),
                   y=t(g['centers'][:, 1]), theta=t(g['thetas']),
                   depth_offset=t(g['depth_offsets']), width=t(g['widths']),
                   score=torch.zeros(n), host_frame=np.zeros(n, int))


def test_lifting_equals_the_reference_in_grasp_order():
    """The reference appends the zero-depth centres last (its rows: the two read ones, then
    the fixed-up ones); here each stays in its grasp's place, with the same values."""
    g = golden('lift')
    depth = golden_depth()
    np.testing.assert_array_equal(depth[50:130, 100:250].numpy(), g['depth_patch'])
    centers = golden_centers(g)
    xyz = lift_centers(centers, depth[None], REALSENSE[None], (640, 360)).numpy()
    read = (depth[centers.x * 2, centers.y * 2] != 0).numpy()
    order = np.concatenate([np.flatnonzero(read), np.flatnonzero(~read)])
    assert order.tolist() != list(range(len(order)))  # the quirk is exercised
    np.testing.assert_array_equal(xyz[order], g['lifted'])
    # the ball radius of the reference's (misaligned) rows, from their depths
    radius = ball_radius(centers, torch.from_numpy(g['lifted'][:, 2]), REALSENSE[None], 2)
    np.testing.assert_allclose(radius.numpy(), g['ball_widths'], rtol=1e-7)


def test_reference_order_reproduces_the_reference_rows():
    """center_order='reference': the rows the reference's center2dtopc returns (its golden),
    row for row, and the ball radii it computes from them."""
    g = golden('lift')
    centers = golden_centers(g)
    xyz = lift_centers(centers, golden_depth()[None], REALSENSE[None], (640, 360),
                       reference_order=True)
    np.testing.assert_array_equal(xyz.numpy(), g['lifted'])
    radius = ball_radius(centers, xyz[:, 2], REALSENSE[None], 2)
    np.testing.assert_allclose(radius.numpy(), g['ball_widths'], rtol=1e-7)


def test_reference_order_per_frame():
    """Two frames (the rule holds per frame, ``center2dtopc``'s loop over the batch): frame 0's
    centre 1 and frame 1's centres 3 and 4 fall on zero depth. The reference's tensor per frame
    is [read centres..., fixed-up centres...]; row k stays with 2-D grasp k, so the rows are
    the grasp-order rows taken in the order written out here by hand."""
    depth = torch.full((2, 64, 48), 700.0, dtype=torch.float64)
    depth += torch.arange(64, dtype=torch.float64)[None, :, None]  # distinct rows
    depth[0, 10:12, 10:12] = 0  # frame 0, centre 1 at heat (5, 5) -> depth (10, 10)
    depth[1, 20:22, 4:6] = 0  # frame 1, centres 3 and 4
    depth[1, 30:32, 30:32] = 0
    t = torch.tensor
    centers = Centers(frame=t([0, 0, 0, 1, 1, 1]), x=t([2, 5, 20, 10, 15, 3]),
                      y=t([3, 5, 9, 2, 15, 20]), theta=torch.zeros(6, dtype=torch.float64),
                      depth_offset=t([1., 2., 3., 4., 5., 6.], dtype=torch.float64),
                      width=torch.full((6, ), 10., dtype=torch.float64), score=torch.zeros(6),
                      host_frame=np.array([0, 0, 0, 1, 1, 1]))
    k = REALSENSE[None].expand(2, 3, 3)
    own = lift_centers(centers, depth, k, (32, 24)).numpy()
    ref = lift_centers(centers, depth, k, (32, 24), reference_order=True).numpy()
    np.testing.assert_array_equal(ref, own[[0, 2, 1, 5, 3, 4]])
    assert not np.array_equal(ref, own)


def test_lifting_rules_in_numpy():
    depth = golden_depth()
    g = golden('lift')
    centers = golden_centers(g)
    xyz = lift_centers(centers, depth[None], REALSENSE[None], (640, 360)).numpy()
    d = depth.numpy()
    fx, fy, cx, cy = 927.17, 927.37, 651.32, 349.62
    for i, (x, y) in enumerate(g['centers'] * 2):
        raw = d[x, y]
        if raw == 0:
            window = d[max(0, x - 4):min(1279, x + 4), max(0, y - 4):min(719, y + 4)]
            positive = np.sort(window[window > 0])
            z = ((positive[(len(positive) - 1) // 2] + g['depth_offsets'][i]) / 1000
                 if len(positive) else d.mean() / 1000)
        else:
            z = (raw + g['depth_offsets'][i]) / 1000
        np.testing.assert_allclose(xyz[i], [z / fx * (x - cx), z / fy * (y - cy), z],
                                   rtol=1e-6, atol=1e-9)
    width = 2 * g['widths']  # px at 1280; the radius is the full width at that depth
    expected = xyz[:, 2] * np.hypot(width / 2 * np.cos(g['thetas']) / fx,
                                    width / 2 * np.sin(g['thetas']) / fy) * 2
    radius = ball_radius(centers, torch.from_numpy(xyz[:, 2]), REALSENSE[None], 2).numpy()
    np.testing.assert_allclose(radius, expected, rtol=1e-6)


# ---- 6-D decode ----

def test_decode_equals_the_reference_rows():
    g = golden('decode_6d')
    n = len(g['thetas'])
    rows, frames = decode_grasps(
        torch.from_numpy(g['centers']), torch.from_numpy(g['thetas']),
        torch.from_numpy(g['widths']), torch.zeros(n, dtype=torch.long),
        torch.from_numpy(g['pred']), torch.from_numpy(g['offset']),
        torch.from_numpy(g['gamma']), torch.from_numpy(g['beta']), REALSENSE[None], 2.0)
    rows = rows.numpy()
    assert rows.shape == (len(g['scores']), 17) and (frames == 0).all()
    assert len(rows) < 10 * n  # the |γ| < 60° filter removed some
    np.testing.assert_allclose(rows[:, 0], g['scores'], rtol=1e-7)
    np.testing.assert_allclose(rows[:, 1], g['grasp_widths'], rtol=1e-12)
    np.testing.assert_allclose(rows[:, 2], g['heights'], rtol=1e-12)
    np.testing.assert_array_equal(rows[:, 3], g['depths'])
    np.testing.assert_allclose(rows[:, 4:13], g['rotations'].reshape(-1, 9), atol=1e-14)
    np.testing.assert_allclose(rows[:, 13:16], g['translations'], atol=1e-15)
    assert (rows[:, 16] == -1).all()


def test_decode_rules_in_numpy():
    """R = R0(θ) Rz(γ) Ry(β) with R0 = [e_z | (−cos θ, sin θ, 0) | (−sin θ, −cos θ, 0)] (up to
    fx ≠ fy): its last row is (cos γ cos β, −sin γ, cos γ sin β); the centre moves by
    0.02·clip(offset); anchor i is (γ[i % 7], β[i // 7])."""
    rng = np.random.default_rng(1)
    n = 4
    pred = torch.from_numpy(rng.normal(0, 2, (n, 49)))
    offset = torch.from_numpy(rng.normal(0, 1, (n, 49, 3)))
    centers = torch.from_numpy(rng.uniform((-0.1, -0.1, 0.5), (0.1, 0.1, 0.7), (n, 3)))
    theta = torch.from_numpy(rng.uniform(-1.5, 1.5, n))
    gamma, beta = initial_anchors(), initial_anchors() * 0.9
    eye = torch.eye(3, dtype=torch.float64)
    eye[0, 0] = eye[1, 1] = 900.0
    rows, frames = decode_grasps(centers, theta, torch.full((n,), 40.0), torch.arange(n), pred,
                                 offset, gamma, beta, eye[None].expand(n, 3, 3), 2.0, top_k=49,
                                 max_gamma=math.pi)
    rows = rows.numpy()
    p = 1 / (1 + np.exp(-pred.numpy()))
    for i in range(n):
        mine = rows[frames.numpy() == i]
        order = np.argsort(-p[i])
        np.testing.assert_allclose(mine[:, 0], p[i][order], rtol=1e-12)
        g, b = gamma.numpy()[order % 7] * np.pi / 2, beta.numpy()[order // 7] * np.pi / 2
        r = mine[:, 4:13].reshape(-1, 3, 3)
        np.testing.assert_allclose(r[:, 2], np.stack([np.cos(g) * np.cos(b), -np.sin(g),
                                                      np.cos(g) * np.sin(b)], 1), atol=1e-12)
        t = theta[i].item()
        r0 = np.array([[0, -np.cos(t), -np.sin(t)], [0, np.sin(t), -np.cos(t)], [1, 0, 0]])
        # within the 1e-8 the reference adds to the key-point norms (~1e-6 here)
        j = np.argmax(np.abs(g * b))
        np.testing.assert_allclose(r[j], r0 @ rz(g[j]) @ ry(b[j]), atol=5e-6)
        assert np.abs(r[j] - r0 @ ry(b[j]) @ rz(g[j])).max() > 1e-3  # the order matters
        moved = centers[i].numpy() + 0.02 * np.clip(offset[i].numpy()[order], -1, 1)
        np.testing.assert_allclose(mine[:, 13:16], moved, atol=1e-15)
        z = moved[:, 2]
        np.testing.assert_allclose(mine[:, 1], 80 * z / 900, rtol=1e-12)  # 2·40 px at f 900
    kept, _ = decode_grasps(centers, theta, torch.full((n,), 40.0), torch.arange(n), pred,
                            offset, gamma, beta, eye[None].expand(n, 3, 3), 2.0, top_k=49)
    gammas = np.arcsin(-kept.numpy()[:, 4:13].reshape(-1, 3, 3)[:, 2, 1])
    assert len(kept) < len(rows) and (np.abs(gammas) < math.pi / 3).all()


def test_evaluation_nms_of_a_dump_is_unchanged_by_a_first_nms():
    """Why the model leaves the 0.03 m / 30° NMS to the evaluation: applied to rows that
    already passed it, it keeps them all (conflicts are symmetric), so the evaluated set is
    the same with or without the reference's NMS before dumping."""
    from mmgrasp.evaluation.functional import grasp_nms
    g = golden('decode_6d')
    rows = np.zeros((len(g['scores']), 17))
    rows[:, 0], rows[:, 4:13], rows[:, 13:16] = (g['scores'], g['rotations'].reshape(-1, 9),
                                                 g['translations'])
    shift = np.zeros(17)
    shift[0], shift[13] = 0.01, 0.004  # near copies, better scored: suppress the originals
    rows = np.concatenate([rows, rows + shift])
    once = grasp_nms(rows)
    assert len(once) < len(rows)
    twice = grasp_nms(once)
    assert sorted(map(tuple, twice)) == sorted(map(tuple, once))


# ---- collision ----

def rz(a):
    return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])


def ry(a):
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def collision_rows(g) -> np.ndarray:
    n = len(g['widths'])
    rows = np.zeros((n, 17))
    rows[:, 1], rows[:, 4:13], rows[:, 13:16] = (g['widths'], g['rotations'].reshape(n, 9),
                                                 g['translations'])
    return rows


def test_collision_filter_equals_the_reference_up_to_its_float16():
    """The reference casts cloud and grasps to float16; here float64. On float16-rounded
    inputs the two agree on every grasp; on the originals on all but a few near a box face."""
    g = golden('collision')
    rows = collision_rows(g)
    half = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731
    rounded = rows.copy()
    rounded[:, [1, *range(4, 16)]] = half(rows[:, [1, *range(4, 16)]])
    np.testing.assert_array_equal(hggd_collision_free(rounded, half(g['cloud'])),
                                  g['no_collision'])
    ours = hggd_collision_free(rows, g['cloud'])
    assert (ours != g['no_collision']).sum() <= 3 and ours.sum() > 5


def test_collision_options_change_the_verdict():
    g = golden('collision')
    rows, cloud = collision_rows(g), g['cloud']
    base = hggd_collision_free(rows, cloud)
    assert 0.1 < base.mean() < 0.9
    assert (hggd_collision_free(rows, cloud, min_points=50) <= base).all()
    assert hggd_collision_free(rows, cloud, min_points=50).sum() < base.sum()
    assert (hggd_collision_free(rows, cloud, finger_width=0.0) >= base).all()
    assert (hggd_collision_free(rows, cloud, voxel_size=0.03) != base).any()
    assert hggd_collision_free(np.zeros((0, 17)), cloud).shape == (0,)


def test_collision_boxes_by_hand():
    """One grasp at the origin, approach +x, jaws 4 cm apart: three points between the jaws
    keep it (two do not), a point in a finger or up to ``approach_dist`` behind the fingers
    (x in (−0.01 − 0.04 − approach, −0.02]) drops it."""
    row = np.zeros((1, 17))
    row[0, 1], row[0, 4:13] = 0.04, np.eye(3).ravel()
    between = np.array([[0.01, 0.0, 0.0], [0.0, 0.01, 0.0], [-0.01, -0.01, 0.001]])

    def keep(*extra, **kwargs):
        cloud = np.concatenate([between, np.array(extra).reshape(-1, 3)])
        return bool(hggd_collision_free(row, cloud, voxel_size=1e-4, **kwargs)[0])

    assert keep() and not hggd_collision_free(row, between[:2], voxel_size=1e-4)[0]
    assert not keep([0.0, 0.025, 0.0])  # in the right finger
    assert keep([0.0, 0.025, 0.006])  # above it (height 0.01)
    assert not keep([-0.06, 0.0, 0.0]) and keep([-0.06, 0.0, 0.0], approach_dist=0.02)
    assert keep([-0.09, 0.0, 0.0])


# ---- anchors ----

def test_anchor_shift_equals_the_reference():
    g = golden('shift')
    labels = torch.from_numpy(g['labels'])
    anchors = HGGDAnchors(threshold=len(labels) - 1)
    anchors.shift_enabled = True
    np.testing.assert_array_equal(anchors.gamma.numpy(), initial_anchors().numpy())
    anchors.update(labels[:, 4], labels[:, 5], torch.ones(len(labels), dtype=torch.bool))
    np.testing.assert_allclose(anchors.gamma.numpy(), g['gamma1'], rtol=0, atol=1e-12)
    np.testing.assert_allclose(anchors.beta.numpy(), g['beta1'], rtol=0, atol=1e-12)
    assert float(anchors.total) == 0  # counted afresh after a shift
    second = labels[::3]
    anchors.threshold = len(second) - 1
    half = len(second) // 2  # in two batches, padded with labels marked invalid
    valid = torch.ones(len(second), dtype=torch.bool)
    valid[half:] = False
    anchors.update(second[:, 4], second[:, 5], valid)
    np.testing.assert_allclose(anchors.gamma.numpy(), g['gamma1'], atol=1e-12)  # not yet
    anchors.update(second[:, 4], second[:, 5], ~valid)
    np.testing.assert_allclose(anchors.gamma.numpy(), g['gamma2'], rtol=0, atol=1e-12)
    np.testing.assert_allclose(anchors.beta.numpy(), g['beta2'], rtol=0, atol=1e-12)
    assert anchors.gamma.dtype == torch.float64 and 'gamma' in anchors.state_dict()
    assert 'counts' not in anchors.state_dict()


def test_anchor_shift_only_when_enabled():
    labels = torch.from_numpy(golden('shift')['labels'])
    anchors = HGGDAnchors(threshold=10)
    anchors.update(labels[:, 4], labels[:, 5], torch.ones(len(labels), dtype=torch.bool))
    np.testing.assert_array_equal(anchors.gamma.numpy(), initial_anchors().numpy())
    assert float(anchors.total) == 0
