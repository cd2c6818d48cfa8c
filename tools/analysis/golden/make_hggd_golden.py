#!/usr/bin/env python
"""The HGGD goldens, made by running THU-VCLab/HGGD's own code (@69580ff) on the CPU:

- ``tests/data/reference_state_dicts/hggd.json``: names, shapes and dtypes of the state dicts
  of ``AnchorGraspNet(ratio=8, in_dim=4, anchor_k=6)`` and ``PointMultiGraspNet(3, 49)`` as
  ``train_graspnet.py`` builds them, their parameter / buffer counts, and per tensor the sum
  and sum of squares of the initial values after ``torch.manual_seed(0)`` (anchor) and
  ``torch.manual_seed(1)`` (local): the init rules, checked value for value.
- ``tests/data/hggd_golden/*.npz``: the reference functions on seeded random inputs (inputs
  and outputs stored): the two networks' forward passes (eval mode), ``focal_loss``,
  ``offset_reg_loss``, ``compute_anchor_loss``, ``faster_get_local_labels``,
  ``get_center_group_label``, ``anchor_output_process`` + ``detect_2d_grasp``,
  ``center2dtopc`` + ``RectGraspGroup.get_6d_width``, ``detect_6d_grasp_multi`` +
  ``RectGraspGroup.to_6d_grasp_group(depth=0.02)``, ``ModelFreeCollisionDetector(mode=
  'graspnet').detect`` and ``shift_anchors``.

    python tools/analysis/golden/make_hggd_golden.py \\
        --hggd MIRROR/THU-VCLab+HGGD/repo [--table PATH] [--golden DIR]

Run it in a venv of its own with torch (CPU) and numpy; ``torchvision`` is optional there but
used when installed (``pip install --no-deps torchvision`` matching torch: its ``gaussian_blur``
is pure torch; the package is imported without its ``__init__``, whose compiled ops a wheel
built for another torch refuses). The reference files are read with ``git show HEAD:<path>``
into a temporary folder and run unchanged; what they import and this never runs is stubbed
there: ``pytorch3d`` (kNN, FPS, ball query, masked gather, Euler/quaternion transforms),
``cupoch`` (a point cloud whose ``voxel_down_sample`` returns it unchanged: the collision
golden stores the already downsampled cloud it is given), ``numba`` (``njit``/``jit`` return
the function, ``typed.List`` is ``list``), ``open3d``, ``cv2``, ``skimage.draw`` and
``customgraspnetAPI.grasp``. The reference's ``.cuda()`` calls and ``device='cuda'`` arguments
are sent to the CPU by patching ``torch.Tensor.cuda`` / ``torch.Tensor.to`` and the factory
functions in this process (``cuda_to_cpu``).
"""
import argparse
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types
from typing import Dict

import numpy as np

REFERENCE_FILES = ('models/anchornet.py', 'models/resnet_model.py', 'models/localgraspnet.py',
                   'models/pointnet.py', 'models/losses.py', 'dataset/config.py',
                   'dataset/utils.py', 'dataset/evaluation.py', 'dataset/grasp.py',
                   'dataset/graspnet_utils.py', 'dataset/pc_dataset_tools.py',
                   'dataset/collision_detector.py')
STUBS: Dict[str, str] = {
    'numba/__init__.py': '''def njit(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


jit = njit
''',
    'numba/typed/__init__.py': 'List = list\n',
    'pytorch3d/__init__.py': '',
    'pytorch3d/ops/__init__.py': '''def _unused(*args, **kwargs):
    raise NotImplementedError('pytorch3d stub: not called by the goldens')


knn_points = ball_query = sample_farthest_points = _unused
''',
    'pytorch3d/ops/utils.py': 'from . import _unused as masked_gather  # noqa: F401\n',
    'pytorch3d/transforms/__init__.py':
        'from ..ops import _unused as euler_angles_to_matrix, _unused as matrix_to_quaternion'
        '  # noqa: F401\n',
    'cupoch/__init__.py': '''class _PointCloud:
    """voxel_down_sample returns the cloud unchanged: the golden downsamples beforehand."""

    def from_points_dlpack(self, capsule):
        import torch.utils.dlpack
        self.points = torch.utils.dlpack.from_dlpack(capsule).clone()

    def voxel_down_sample(self, voxel_size):
        return self


geometry = type('geometry', (), {'PointCloud': _PointCloud})
''',
    'open3d/__init__.py': '',
    'cv2/__init__.py': '',
    'skimage/__init__.py': '',
    'skimage/draw/__init__.py': 'def polygon(*args, **kwargs):\n    raise NotImplementedError\n',
    'customgraspnetAPI/__init__.py': '',
    'customgraspnetAPI/grasp.py': 'class Grasp:\n    pass\n\n\nclass GraspGroup:\n    pass\n',
}


def build_tree(folder: str, hggd: str) -> None:
    files = dict(STUBS)
    for path in REFERENCE_FILES:
        files[path] = subprocess.check_output(['git', '-C', hggd, 'show', f'HEAD:{path}'],
                                              text=True)
    for path, text in files.items():
        os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(folder, path), 'w') as f:
            f.write(text)


def import_torchvision_without_init() -> bool:
    """Make ``torchvision.transforms.functional`` importable without torchvision's
    ``__init__`` (which loads compiled ops); False when torchvision is not installed."""
    spec = importlib.util.find_spec('torchvision')
    if spec is None:
        return False
    package = types.ModuleType('torchvision')
    package.__path__ = [os.path.dirname(spec.origin)]
    sys.modules['torchvision'] = package
    return True


def cuda_to_cpu() -> None:
    import torch

    def strip(kwargs):
        if str(kwargs.get('device', '')).startswith('cuda'):
            kwargs['device'] = 'cpu'
        return kwargs

    for name in ('zeros', 'ones', 'full', 'randn', 'rand', 'randint', 'arange', 'tensor',
                 'empty', 'eye', 'linspace'):
        original = getattr(torch, name)
        setattr(torch, name, functools.wraps(original)(
            lambda *a, _f=original, **k: _f(*a, **strip(k))))
    torch.Tensor.cuda = lambda self, *a, **k: self
    original_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        args = tuple('cpu' if isinstance(a, str) and a.startswith('cuda') else a for a in args)
        return original_to(self, *args, **strip(kwargs))
    torch.Tensor.to = to


def tensor_stats(state) -> dict:
    return {k: [float(v.double().sum()), float(v.double().square().sum())]
            for k, v in state.items()}


def make_table(hggd: str) -> tuple:
    import torch
    from models.anchornet import AnchorGraspNet
    from models.localgraspnet import PointMultiGraspNet
    torch.manual_seed(0)
    anchor = AnchorGraspNet(ratio=8, in_dim=4, anchor_k=6)
    torch.manual_seed(1)
    local = PointMultiGraspNet(3, 7 ** 2)
    stats = ('running_mean', 'running_var', 'num_batches_tracked')
    table = {'source': f'THU-VCLab/HGGD@{_commit(hggd)}',
             'how': ('listed from state_dict() of the reference models, instantiated as '
                     'train_graspnet.py builds them (torch '
                     f'{torch.__version__}), by tools/analysis/golden/make_hggd_golden.py; '
                     'init: per tensor [sum, sum of squares] after torch.manual_seed(0) '
                     '(anchor) / torch.manual_seed(1) (local)'),
             'checkpoint': "torch.save({'anchor', 'local', 'optimizer', 'gamma', 'beta'}) "
                           '(train_utils.py log_and_save)'}
    for name, model in (('anchor', anchor), ('local', local)):
        state = model.state_dict()
        table[name] = {
            'parameters': sum(p.numel() for p in model.parameters()),
            'buffers': sum(v.numel() for k, v in state.items() if k.endswith(stats)),
            'tensors': len(state),
            'state_dict': {k: list(v.shape) for k, v in state.items()},
            'dtypes': {k: str(v.dtype).replace('torch.', '') for k, v in state.items()},
            'init': tensor_stats(state)}
    return table, anchor, local


def _commit(repo: str) -> str:
    return subprocess.check_output(['git', '-C', repo, 'rev-parse', 'HEAD'], text=True)[:7]


def golden_networks(anchor, local) -> dict:
    import torch
    gen = torch.Generator().manual_seed(2)
    image = torch.randn(1, 4, 640, 40, generator=gen)  # W 640: features are taken at W/8 == 80
    regions = torch.randn(5, 512, 35, generator=gen) * 0.05
    info = torch.randn(5, 3, generator=gen)
    with torch.no_grad():
        (loc, cls, theta, depth, width), features = anchor.eval()(image)
        _, pred, offset = local.eval()(regions, info)
    # the inputs are drawn again by the test from the same generator: their sums tell drift
    return dict(input_sums=torch.stack([image.double().sum(), regions.double().sum(),
                                        info.double().sum()]),
                loc_map=loc, cls_mask=cls, theta_offset=theta, depth_offset=depth,
                width_offset=width, features=features, pred=pred, offset=offset)


def golden_losses() -> dict:
    import torch
    from models.losses import compute_anchor_loss, focal_loss, offset_reg_loss
    gen = torch.Generator().manual_seed(3)
    out = {}
    logits = torch.randn(2, 1, 24, 16, generator=gen) * 3
    targets = torch.rand(2, 1, 24, 16, generator=gen) ** 4
    targets[0, 0, 3, 4] = targets[1, 0, 7, 9] = 1.0
    out.update(focal_logits=logits, focal_targets=targets)
    for name, kwargs in (('loc', dict(neg_suppress=True)), ('cls', dict(thres=0.5, alpha=0.25)),
                         ('plain', {})):
        out[f'focal_{name}'] = focal_loss(logits, targets, **kwargs)
        out[f'focal_{name}_nopos'] = focal_loss(logits, targets * 0.5, **kwargs)
    preds = [torch.randn(2, 6, 6, 4, generator=gen) for _ in range(3)]
    gts = [torch.randn(2, 6, 6, 4, generator=gen) * 0.4 for _ in range(3)]
    counts = torch.randint(0, 3, (2, 6, 6, 4), generator=gen).float()
    mask = 2 / (1 + torch.exp(-counts)) - 1
    out.update(reg_preds=torch.stack(preds), reg_targets=torch.stack(gts), cls_mask=mask,
               offset_reg=offset_reg_loss(preds, gts, mask))
    loc_logits = torch.randn(2, 1, 48, 24, generator=gen)
    loc_target = torch.rand(2, 1, 48, 24, generator=gen) ** 6
    loc_target[:, :, 10, 10] = 1
    cls_logits = torch.randn(2, 6, 6, 3, generator=gen)
    pred = [loc_logits, cls_logits, *[p[..., :3] for p in preds]]
    target = [loc_target, mask[..., :3], *[g[..., :3] for g in gts]]
    result = compute_anchor_loss(pred, target, loc_a=1, reg_b=5, cls_c=1)
    out.update(anchor_loc_logits=loc_logits, anchor_loc_target=loc_target,
               anchor_cls_logits=cls_logits, anchor_loss=result['loss'],
               **{f'anchor_{k}': v for k, v in result['losses'].items()})
    return out


def golden_labels() -> dict:
    """``get_center_group_label`` (2 cm, 500 nearest) and ``faster_get_local_labels``."""
    import torch
    from dataset.pc_dataset_tools import get_center_group_label
    from dataset.utils import convert_2d_to_3d
    from models.losses import faster_get_local_labels
    rng = np.random.default_rng(4)
    out = {}
    labels = []
    for frame, n in enumerate((2000, 40, 0)):  # frame 0: more than 500 within 2 cm
        centers_2d = rng.uniform((620, 330), (680, 370), (n, 2))
        depths = rng.uniform(599, 603, n)
        labels.append(dict(centers_2d=centers_2d, center_z_depths=depths,
                           thetas_rad=rng.uniform(-np.pi, np.pi, n).astype(np.float32),
                           gammas_rad=rng.uniform(-1.4, 1.4, n),
                           betas_rad=rng.uniform(-1.4, 1.4, n),
                           widths_2d=rng.uniform(20, 90, n).astype(np.float32),
                           scores_from_6d=rng.choice([0.9, 1.0], n).astype(np.float32)))
        for key, value in labels[-1].items():
            out[f'labels{frame}_{key}'] = value
    centers = []
    for frame, m in enumerate((6, 3, 2)):
        picks = rng.uniform((620, 330), (680, 370), (m, 2))
        xyz = convert_2d_to_3d(picks[:, 0], picks[:, 1], rng.uniform(598, 606, m))
        centers.append(torch.from_numpy(xyz))
        out[f'centers{frame}'] = xyz
    groups, total = get_center_group_label(centers, labels, 500)
    out['group_sizes'] = np.array([len(g) for g in groups])
    out['groups'] = torch.cat(groups).numpy() if len(total) else np.zeros((0, 8), np.float32)
    out['total_labels'] = total.numpy()
    # the 49 anchors as compute_multicls_loss builds them (float32 eulers), and theta per centre
    basic = torch.linspace(-1, 1, 8)
    anchors = ((basic[1:] + basic[:-1]) / 2).double() + torch.from_numpy(
        rng.normal(0, 0.02, 7))
    eulers = torch.zeros((49, 3), dtype=torch.float32)
    pairs = torch.cartesian_prod(anchors * torch.pi / 2, anchors * torch.pi / 2)
    eulers[:, 1], eulers[:, 2] = pairs[:, 1], pairs[:, 0]
    thetas = rng.uniform(-np.pi / 2, np.pi / 2, len(groups)).astype(np.float32)
    multi, offsets = faster_get_local_labels(
        eulers.numpy().astype(np.float64), thetas.astype(np.float64),
        [g[:, 3:6].numpy().astype(np.float64) for g in groups],
        [g[:, :3].numpy().astype(np.float64) for g in groups])
    out.update(anchors=anchors.numpy(), thetas=thetas, multi_labels=multi,
               offset_labels=offsets)
    return out


def smooth_field(rng, shape, scale) -> np.ndarray:
    """A random field smooth over ~``scale`` cells (bilinear up-sampling of noise)."""
    import torch
    coarse = torch.from_numpy(rng.normal(0, 1, (1, 1, shape[0] // scale + 2,
                                                 shape[1] // scale + 2)).astype(np.float32))
    return torch.nn.functional.interpolate(coarse, size=shape, mode='bilinear',
                                           align_corners=False)[0, 0].numpy()


def golden_decode_2d() -> dict:
    import torch
    from dataset.evaluation import anchor_output_process, detect_2d_grasp
    rng = np.random.default_rng(5)
    loc = torch.from_numpy(smooth_field(rng, (128, 72), 6) * 4 - 3)[None, None]
    loc[0, 0, 127, 71] = loc[0, 0, 0, 0] = 9  # the last row and column are never chosen
    maps = {name: torch.from_numpy(rng.normal(0, 0.6, (1, 6, 16, 9)).astype(np.float32))
            for name in ('cls', 'theta', 'depth', 'width')}
    out = dict(loc_logits=loc.numpy(), **{f'{k}_logits': v.numpy() for k, v in maps.items()})
    processed = anchor_output_process(loc, maps['cls'], maps['theta'], maps['depth'],
                                      maps['width'], sigma=10)
    out['blurred'] = processed[0]
    for name, (num, thres) in dict(test=(48, 0.01), train=(128, 0), few=(8, 0.3)).items():
        rect = detect_2d_grasp(*processed, ratio=8, anchor_k=6, anchor_w=50.0, anchor_z=20.0,
                               mask_thre=thres, center_num=num, grid_size=8, grasp_nms=8)
        for field in ('centers', 'widths', 'depths', 'scores', 'thetas'):
            out[f'{name}_{field}'] = getattr(rect, field)
    return out


def depth_image(height: int = 1280, width: int = 720) -> np.ndarray:
    """The lifting golden's depth image (x-major, mm): a tilted plane with holes, also built
    by the test from this formula."""
    x, y = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
    depth = np.round(600 + 0.05 * x + 0.1 * y).astype(np.float32)
    depth[100:140, 200:260] = 0  # holes: centres here take the window median or the mean
    depth[400:402, 300:302] = 0
    depth[1270:, 700:] = 0
    return depth


def golden_lift() -> dict:
    import torch
    from dataset.grasp import RectGraspGroup
    from dataset.pc_dataset_tools import center2dtopc
    rng = np.random.default_rng(6)
    centers = np.array([[10, 10], [60, 120], [200, 150], [55, 115], [639, 359], [200, 150],
                        [300, 20], [62, 128], [636, 352]], dtype=np.int64)
    depth = torch.from_numpy(depth_image())
    depth[60:70, 115:125] = 0  # (55, 115) and (60, 120) at 1280 x 720: zero neighbourhood...
    depth[118:124, 236:244] = 0  # ...and (62, 128) in the 100:140 hole with none positive
    n = len(centers)
    rect = RectGraspGroup(centers=centers, heights=np.full(n, 25), widths=rng.uniform(20, 130, n),
                          depths=rng.uniform(-20, 20, n), scores=rng.uniform(0, 1, n),
                          thetas=rng.uniform(-np.pi / 2, np.pi / 2, n))
    rects = [rect]
    lifted = center2dtopc(rects, 48, depth[None], (640, 360), append_random_center=False,
                          is_training=False)[0]
    return dict(centers=centers, depth_offsets=rect.depths, widths=rect.widths,
                thetas=rect.thetas, depth_patch=depth[50:130, 100:250].numpy(),
                lifted=lifted.numpy(), actual_depths=rects[0].actual_depths,
                ball_widths=rects[0].get_6d_width())


def golden_decode_6d() -> dict:
    import torch
    from dataset.evaluation import detect_6d_grasp_multi
    from dataset.grasp import RectGraspGroup
    gen = torch.Generator().manual_seed(7)
    rng = np.random.default_rng(7)
    n = 6
    rect = RectGraspGroup(centers=rng.integers(0, 360, (n, 2)), heights=np.full(n, 25),
                          widths=rng.uniform(20, 130, n), depths=rng.uniform(-20, 20, n),
                          scores=rng.uniform(0, 1, n), thetas=rng.uniform(-1.5, 1.5, n))
    pred = torch.randn(n, 49, generator=gen) * 2
    offset = torch.randn(n, 49, 3, generator=gen)
    centers = torch.from_numpy(rng.uniform((-0.2, -0.1, 0.4), (0.2, 0.1, 0.8), (n, 3)))
    basic = torch.linspace(-1, 1, 8)
    anchors = {'gamma': ((basic[1:] + basic[:-1]) / 2).double() + 0.01,
               'beta': ((basic[1:] + basic[:-1]) / 2).double() - 0.02}
    grasps, rects = detect_6d_grasp_multi(rect, pred, offset, [centers], (640, 360), anchors,
                                          k=10)
    group = rects.to_6d_grasp_group(depth=0.02)
    return dict(thetas=rect.thetas, widths=rect.widths, pred=pred.numpy(),
                offset=offset.numpy(), centers=centers.numpy(), gamma=anchors['gamma'].numpy(),
                beta=anchors['beta'].numpy(), pred_grasp=grasps,
                translations=group.translations, rotations=group.rotations,
                grasp_widths=group.widths, heights=group.heights, depths=group.depths,
                scores=group.scores)


def golden_collision() -> dict:
    import torch
    from dataset.collision_detector import ModelFreeCollisionDetector
    rng = np.random.default_rng(8)
    cloud = np.concatenate([rng.uniform((-0.1, -0.1, 0.5), (0.1, 0.1, 0.52), (1500, 3)),
                            rng.uniform((-0.03, -0.03, 0.44), (0.03, 0.03, 0.5), (800, 3))])
    cloud = np.unique(np.floor(cloud / 0.01), axis=0) * 0.01 + 0.005  # one point per voxel
    n = 300  # grasps from above the small box, approach about +z, some hitting it
    approach = np.array([0, 0, 1.0]) + rng.normal(0, 0.3, (n, 3))
    approach /= np.linalg.norm(approach, axis=1, keepdims=True)
    side = np.cross(approach, rng.normal(0, 1, (n, 3)))
    side /= np.linalg.norm(side, axis=1, keepdims=True)
    rotations = np.stack([approach, side, np.cross(approach, side)], axis=2)
    translations = rng.uniform((-0.03, -0.03, 0.43), (0.03, 0.03, 0.47), (n, 3))
    widths = rng.uniform(0.03, 0.1, n)
    group = types.SimpleNamespace(translations=translations, rotations=rotations,
                                  widths=widths, size=n)
    detector = ModelFreeCollisionDetector(torch.from_numpy(cloud).float(), voxel_size=0.01,
                                          mode='graspnet')
    keep = detector.detect(group, approach_dist=0.05)
    return dict(cloud=cloud, translations=translations, rotations=rotations, widths=widths,
                no_collision=keep)


def golden_shift() -> dict:
    import torch
    from dataset.utils import shift_anchors
    rng = np.random.default_rng(9)
    labels = np.zeros((5000, 8), dtype=np.float32)
    labels[:, 4] = rng.normal(0.3, 0.4, 5000).clip(-1.5, 1.5)
    labels[:, 5] = rng.normal(-0.2, 0.3, 5000).clip(-1.5, 1.5)
    labels[:40, 4] = -1.56  # far bins: few or no labels
    basic = torch.linspace(-1, 1, 8)
    anchors = {'gamma': (basic[1:] + basic[:-1]) / 2, 'beta': (basic[1:] + basic[:-1]) / 2}
    first = {k: v.clone() for k, v in shift_anchors(torch.from_numpy(labels), anchors).items()}
    second = shift_anchors(torch.from_numpy(labels[::3].copy()), anchors)
    return dict(labels=labels, gamma1=first['gamma'].numpy(), beta1=first['beta'].numpy(),
                gamma2=second['gamma'].numpy(), beta2=second['beta'].numpy())


def save(path: str, arrays: dict) -> None:
    arrays = {k: (v.detach().numpy() if hasattr(v, 'detach') else np.asarray(v))
              for k, v in arrays.items()}
    np.savez_compressed(path + '.tmp.npz', **arrays)
    os.replace(path + '.tmp.npz', path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--hggd', required=True, help='git directory of THU-VCLab/HGGD')
    parser.add_argument('--table', default='tests/data/reference_state_dicts/hggd.json')
    parser.add_argument('--golden', default='tests/data/hggd_golden')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        build_tree(folder, args.hggd)
        sys.path.insert(0, folder)
        has_torchvision = import_torchvision_without_init()
        if not has_torchvision:
            raise SystemExit('torchvision is needed for gaussian_blur (pip install --no-deps '
                             'torchvision matching torch)')
        import torch
        torch.set_num_threads(1)
        table, anchor, local = make_table(args.hggd)
        cuda_to_cpu()
        goldens = dict(networks=golden_networks(anchor, local), losses=golden_losses(),
                       labels=golden_labels(), decode_2d=golden_decode_2d(),
                       lift=golden_lift(), decode_6d=golden_decode_6d(),
                       collision=golden_collision(), shift=golden_shift())
    with open(args.table + '.tmp', 'w') as f:
        json.dump(table, f, indent=1)
        f.write('\n')
    os.replace(args.table + '.tmp', args.table)
    os.makedirs(args.golden, exist_ok=True)
    for name, arrays in goldens.items():
        save(os.path.join(args.golden, f'{name}.npz'), arrays)
    print(f"{table['anchor']['tensors']} + {table['local']['tensors']} tensors, "
          f"{table['anchor']['parameters']} + {table['local']['parameters']} parameters -> "
          f"{args.table}; goldens {sorted(goldens)} -> {args.golden}")


if __name__ == '__main__':
    main()
