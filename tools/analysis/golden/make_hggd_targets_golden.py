"""Make tests/data/hggd_targets_golden/golden.npz: THU-VCLab/HGGD's own dataset code on
procedural 1280 x 720 RGB-D frames and hand-made per-image grasp records (see the README there).

    python tools/analysis/golden/make_hggd_targets_golden.py inputs WORK/inputs.npz
    HGGD_DATA_VENV/bin/python tools/analysis/golden/make_hggd_targets_golden.py \
        reference HGGD_SRC WORK/inputs.npz tests/data/hggd_targets_golden/golden.npz

The first step needs numpy only. The second runs the reference's ``GraspDataset.__getitem__``
(``dataset/base_grasp_dataset.py`` of a checkout ``HGGD_SRC``, not modified) on each case, its
files written in the reference's layout (PNG images, an ``np.savez`` label file), in an
environment with numpy 1.23.5 (the reference's pin), Pillow, torch and scikit-image; the
modules it imports but these code paths never call (open3d, cv2, cupoch, numba, pytorch3d,
torchvision, matplotlib, the vendored graspnetAPI) are replaced by empty stand-ins.
"""
import hashlib
import os
import sys
import tempfile
import types

import numpy as np

WIDTH, HEIGHT = 1280, 720
FIELDS = {'centers_2d': np.float64, 'opens_2d': np.float64, 'thetas_rad': np.float32,
          'gammas_rad': np.float64, 'betas_rad': np.float64, 'widths_2d': np.float32,
          'heights_2d': np.float32, 'scores_from_6d': np.float32, 'object_ids': np.int32,
          'center_z_depths': np.float64}
TARGETS = ('loc_map', 'cls_mask', 'theta_offset', 'depth_offset', 'width_offset')


def scene_images(rng, holes: float):
    """A table plane (700-900 mm) with boxes (520-650 mm), rectangular holes covering about
    ``holes`` of the image, a colour gradient with coloured boxes."""
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH]
    depth = 700. + v // 4 + u // 64
    rgb = np.stack([u // 16 * 3, v // 16 * 5, np.full_like(u, 90)], -1)
    for _ in range(6):
        x, y = rng.integers(100, WIDTH - 250), rng.integers(80, HEIGHT - 200)
        w, h = rng.integers(60, 240), rng.integers(60, 180)
        depth[y:y + h, x:x + w] = rng.uniform(520, 650) + 0.05 * (u[y:y + h, x:x + w] - x)
        rgb[y:y + h, x:x + w] = rng.integers(0, 256, 3)
    while (depth == 0).mean() < holes:
        x, y = rng.integers(0, WIDTH - 20), rng.integers(0, HEIGHT - 20)
        depth[y:y + rng.integers(3, 40), x:x + rng.integers(3, 60)] = 0
    return np.round(depth).astype(np.uint16), rgb.astype(np.uint8)


def records(rng, depth, count: int, spots: int, border: int = 0, low_scores: int = 0):
    """``count`` rows clustered around ``spots`` points (6 px spread), ``border`` more within 3
    px of the image border, θ over (−π, π] with exact ±π/2 and its neighbours, both scores and
    ``low_scores`` rows of score 0.5 (the load-time filter drops them)."""
    n = count + border
    if spots:
        hubs = np.stack([rng.uniform(5, WIDTH - 5, spots), rng.uniform(5, HEIGHT - 5, spots)], -1)
        centers = hubs[rng.integers(0, spots, count)] + rng.normal(0, 6, (count, 2))
        centers = np.round(centers * 64) / 64  # binary fractions: the golden compresses
    else:
        centers = np.zeros((count, 2))
    edge = rng.uniform([0.01, 0.01], [WIDTH - 0.01, HEIGHT - 0.01], (border, 2))
    side = rng.integers(0, 4, border)  # left, right, top, bottom
    edge[side == 0, 0] = rng.uniform(0.01, 3, (side == 0).sum())
    edge[side == 1, 0] = rng.uniform(WIDTH - 3, WIDTH - 0.01, (side == 1).sum())
    edge[side == 2, 1] = rng.uniform(0.01, 3, (side == 2).sum())
    edge[side == 3, 1] = rng.uniform(HEIGHT - 3, HEIGHT - 0.01, (side == 3).sum())
    centers = np.concatenate([centers, edge]).clip([0.01, 0.01], [WIDTH - 0.01, HEIGHT - 0.01])
    pixel = centers.astype(np.int64)
    observed = depth[pixel[:, 1], pixel[:, 0]].astype(np.float64)
    thetas = rng.uniform(-np.pi, np.pi, n).astype(np.float32)
    special = np.float32([np.pi / 2, -np.pi / 2, np.nextafter(np.float32(np.pi / 2), 9),
                          np.nextafter(np.float32(-np.pi / 2), -9), np.pi, -np.pi, 0])
    thetas[:min(n, len(special))] = special[:min(n, len(special))]
    widths = rng.uniform(5, 300, n).astype(np.float32)
    scores = rng.choice(np.float32([0.9, 1.0]), n)
    scores[rng.permutation(n)[:low_scores]] = 0.5
    angles = np.linspace(-1.2, 1.2, 9)  # γ, β, opens: read by no target (few values)
    rows = dict(centers_2d=centers, thetas_rad=thetas, opens_2d=np.zeros((n, 2)),
                gammas_rad=rng.choice(angles, n), betas_rad=rng.choice(angles, n),
                widths_2d=widths, heights_2d=rng.uniform(5, 60, n).astype(np.float32),
                scores_from_6d=scores, object_ids=rng.integers(0, 88, n),
                center_z_depths=np.where(observed > 0, observed, 700.)
                + np.round(rng.normal(0, 30, n) * 16) / 16)
    return {k: np.asarray(rows[k]).astype(t) for k, t in FIELDS.items()}


def make_inputs(out: str) -> None:
    """The cases: a cluttered frame (4 000 clustered rows, 40 at the border, 200 filtered out),
    a frame with 45 % holes (1 500 rows around 8 spots: many cells with "maintain" events), one
    row, no row, and no depth at all; ``<case>/depth`` and the rows, or ``<case>/image`` naming
    the case whose depth it shares, and one colour image ``rgb``."""
    rng = np.random.default_rng(40)
    scene, rgb = scene_images(rng, 0.12)
    holes, _ = scene_images(rng, 0.45)
    cases = dict(scene=('scene', records(rng, scene, 4000, 60, border=40, low_scores=200)),
                 holes=('holes', records(rng, holes, 1500, 8)),
                 one=('holes', records(rng, holes, 1, 1)), none=('holes', records(rng, holes, 0, 0)),
                 no_depth=('no_depth', records(rng, holes, 60, 3)))
    depths = dict(scene=scene, holes=holes, no_depth=np.zeros_like(holes))
    arrays = dict(rgb=rgb)
    for name, (image, rows) in cases.items():
        if image == name:
            arrays[f'{name}/depth'] = depths[name]
        else:
            arrays[f'{name}/image'] = np.array(image)
        arrays.update({f'{name}/{k}': v for k, v in rows.items()})
    np.savez_compressed(out, **arrays)


def case_depth(data, name: str) -> np.ndarray:
    """The raw depth of case ``name`` of an inputs or golden file."""
    image = str(data[f'{name}/image']) if f'{name}/image' in data.files else name
    return data[f'{image}/depth']


def _stub_modules(source: str) -> None:
    def module(name, **attrs):
        sys.modules[name] = types.ModuleType(name)
        vars(sys.modules[name]).update(attrs, __path__=[])

    def passthrough(*args, **kwargs):
        return args[0] if args and callable(args[0]) else (lambda f: f)

    for name in ('cv2', 'open3d', 'cupoch', 'matplotlib', 'matplotlib.pyplot', 'pytorch3d',
                 'pytorch3d.ops', 'torchvision', 'customgraspnetAPI'):
        module(name)
    module('numba', jit=passthrough, njit=passthrough)
    module('pytorch3d.transforms', euler_angles_to_matrix=None, matrix_to_quaternion=None)
    module('torchvision.transforms', ColorJitter=None, Compose=None, PILToTensor=None,
           ToPILImage=None)
    module('customgraspnetAPI.grasp', Grasp=None, GraspGroup=None)
    sys.path.insert(0, source)


def run_reference(source: str, inputs: str, out: str) -> None:
    from PIL import Image
    _stub_modules(source)
    from dataset.base_grasp_dataset import GraspDataset

    data = np.load(inputs)
    names = sorted({k.split('/')[0] for k in data.files if '/' in k})
    results = {k: data[k] for k in data.files}  # the inputs travel with the outputs
    results['numpy_version'] = np.array(np.__version__)
    work = tempfile.mkdtemp()
    for name in names:
        paths = {kind: os.path.join(work, f'{name}_{kind}.png') for kind in ('depth', 'rgb')}
        Image.fromarray(case_depth(data, name)).save(paths['depth'])
        Image.fromarray(data['rgb']).save(paths['rgb'])
        label = os.path.join(work, f'{name}_view.npz')
        np.savez(label, **{k: data[f'{name}/{k}'] for k in FIELDS})
        dataset = GraspDataset.__new__(GraspDataset)  # its __init__ only raises
        vars(dataset).update(
            output_size=(640, 360), sigma=10, ratio=8, anchor_k=6, anchor_w=50.0,
            anchor_z=20.0, grasp_count=5000, trainning=True, is_aug=False, aug=None, noise=0,
            random_rotate=False, random_zoom=False, include_depth=True, include_rgb=True,
            depthpath=[paths['depth']], colorpath=[paths['rgb']], grasppath=[label])
        x, targets, *_ = dataset[0]
        # its depth mean (numpy's float32 sum), the one number of x a re-run depends on
        raw = np.array(Image.open(paths['depth']), np.float32)
        metres = np.array(Image.fromarray(raw).resize((640, 360)), np.float32) / 1000.0
        results[f'{name}/depth_mean'] = np.float32(metres.mean())
        results[f'{name}/x_sha1'] = np.array(hashlib.sha1(x.numpy().tobytes()).hexdigest())
        for key, value in zip(TARGETS, targets):
            results[f'{name}/{key}'] = value.numpy()
    np.savez_compressed(out, **results)


if __name__ == '__main__':
    if sys.argv[1] == 'inputs':
        make_inputs(sys.argv[2])
    elif sys.argv[1] == 'reference':
        run_reference(*sys.argv[2:5])
    else:
        raise SystemExit(__doc__)
