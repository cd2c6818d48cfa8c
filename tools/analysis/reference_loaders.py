"""The original repositories' training loaders, run on an mmgrasp dataset root by
``benchmark_loader.py --reference``: graspnet-baseline's (GraspNet-baseline and
Scale-Balanced-Grasp recipes), GSNet's graspness_implementation and EconomicGrasp's.

The dataset class, its ``__getitem__`` and its collate function are imported from the checkout
and run unchanged, in a torch DataLoader with the same workers, batch size and frames as
mmgrasp's loader. What this module adds around them, and why:

- The constructor is not run: it hard-codes scenes 0-99 and 256 frames per scene. The object is
  made with ``__new__`` and given the attributes the constructor sets (options, the per-frame
  path lists, the collision labels loaded per scene as it loads them), for the benchmark's
  frames in the benchmark's order.
- The labels the training scripts load before the dataset (``load_grasp_labels``) are loaded
  the same way here for the objects present: graspnet-baseline's (points, offsets, scores,
  tolerance) with its object-18 skip (tolerance from the dataset's ``tolerance/``, not the
  checkout's folder), GSNet's simplified (points, width = offsets[..., 2], scores), as its
  ``simplify_dataset.py`` writes them. EconomicGrasp's per-scene label files are written from
  mmgrasp's economic asset, which equals its ``generate_economic.py`` output array for array
  (tests/data/economic_golden).
- Stand-ins for imports the installed packages lack: ``torch._six`` (gone from torch 2;
  ``container_abcs`` is ``collections.abc``, as it was), ``tqdm`` (progress bars of the
  constructor, never run here) when missing, EconomicGrasp's ``utils.arguments`` (parses
  ``sys.argv`` at import; the dataset never reads it), and MinkowskiEngine for GSNet's collate:
  ``sparse_collate`` and ``sparse_quantize`` written here in torch (batch-indexed voxel
  coordinates, ``torch.unique`` for the first point of each voxel and the inverse), standing in
  for its C++ quantisation.
"""
import argparse
import collections.abc
import importlib
import os
import sys
import types
from typing import Callable, List, Sequence, Tuple

import numpy as np
import torch

#: The reference of each model type of mmgrasp's configs.
REFERENCE_OF = {'GraspNetBaseline': 'graspnet-baseline', 'ScaleBalancedGrasp': 'graspnet-baseline',
                'GSNet': 'graspness_implementation', 'EconomicGrasp': 'EconomicGrasp'}


def reference_kind(checkout: str) -> str:
    """Which original repository a checkout is, from its dataset module."""
    path = os.path.join(checkout, 'dataset', 'graspnet_dataset.py')
    if not os.path.isfile(path):
        raise SystemExit(f'--reference {checkout}: no dataset/graspnet_dataset.py (expected a '
                         f'checkout of graspnet-baseline, graspness_implementation or '
                         f'EconomicGrasp)')
    with open(path) as f:
        text = f.read()
    if 'economic_grasp_label' in text:
        return 'EconomicGrasp'
    if 'minkowski_collate_fn' in text:
        return 'graspness_implementation'
    if 'remove_invisible_grasp_points' in text and 'load_grasp_labels' in text:
        return 'graspnet-baseline'
    raise SystemExit(f'--reference {checkout}: {path} is none of the known loaders')


def _stub_module(name: str, **attributes) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def _sparse_collate(coordinates: Sequence, features: Sequence):
    coords = torch.cat([torch.cat([torch.full((len(c), 1), b, dtype=torch.int32),
                                   torch.as_tensor(np.floor(c)).int()], 1)
                        for b, c in enumerate(coordinates)])
    return coords, torch.cat([torch.as_tensor(f) for f in features])


def _sparse_quantize(coordinates, features, return_index=False, return_inverse=False):
    unique, inverse = torch.unique(coordinates, dim=0, return_inverse=True)
    first = torch.full((len(unique),), len(inverse), dtype=torch.long).scatter_reduce(
        0, inverse, torch.arange(len(inverse)), 'amin')
    return coordinates[first], features[first], first, inverse


def _install_stand_ins() -> None:
    if 'torch._six' not in sys.modules:
        _stub_module('torch._six', container_abcs=collections.abc)
    try:
        import tqdm  # noqa: F401
    except ImportError:
        _stub_module('tqdm', tqdm=lambda iterable, *args, **kwargs: iterable)
    _stub_module('MinkowskiEngine', utils=types.SimpleNamespace(
        sparse_collate=_sparse_collate, sparse_quantize=_sparse_quantize))
    _stub_module('utils.arguments', cfgs=argparse.Namespace())


_imported: dict = {}  # checkout -> its dataset module


def _import_dataset(checkout: str, kind: str):
    """The checkout's dataset module, imported as its training script imports it. The three
    repositories use the same module names (``graspnet_dataset``, ``data_utils``): another
    checkout's modules are dropped from ``sys.modules`` first."""
    if checkout in _imported:
        return _imported[checkout]
    _install_stand_ins()
    for name in ('graspnet_dataset', 'data_utils', 'dataset', 'dataset.graspnet_dataset',
                 'utils', 'utils.data_utils'):
        sys.modules.pop(name, None)
    paths = {'graspnet-baseline': ['dataset', 'utils'],
             'graspness_implementation': ['dataset', 'utils'],
             'EconomicGrasp': ['']}[kind]
    for sub in reversed(paths):
        sys.path.insert(0, os.path.join(checkout, sub))
    if kind == 'EconomicGrasp':  # its dataset imports utils.arguments and utils.data_utils
        package = types.ModuleType('utils')
        package.__path__ = [os.path.join(checkout, 'utils')]
        package.arguments = sys.modules['utils.arguments']
        sys.modules['utils'] = package
        module = importlib.import_module('dataset.graspnet_dataset')
    else:
        module = importlib.import_module('graspnet_dataset')
    if not os.path.abspath(module.__file__).startswith(os.path.abspath(checkout) + os.sep):
        raise RuntimeError(f'imported {module.__file__}, not the dataset of {checkout}')
    _imported[checkout] = module
    return module


def _collision_labels(root: str, scenes: Sequence[str]) -> dict:
    out = {}
    for scene in scenes:
        with np.load(os.path.join(root, 'collision_label', scene, 'collision_labels.npz')) as npz:
            out[scene] = {i: npz[f'arr_{i}'] for i in range(len(npz.files))}
    return out


def _object_ids(root: str) -> List[int]:
    return sorted(int(name[:3]) for name in os.listdir(os.path.join(root, 'grasp_label'))
                  if name.endswith('_labels.npz'))


def _economic_label_files(root: str, scenes: Sequence[str], folder: str) -> dict:
    """EconomicGrasp's ``economic_grasp_label_300views/scene_%04d_labels.npz`` of each scene,
    written into ``folder`` from mmgrasp's economic asset (equal to the script's output)."""
    from mmgrasp.datasets.layouts import open_reader
    from mmgrasp.storage.labels.economic_store import open_economic_labels
    from mmgrasp.storage.labels.store import open_label_store
    asset = open_economic_labels(open_label_store(open_reader(root)))
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for scene in scenes:
        path = paths[scene] = os.path.join(folder, f'{scene}_labels.npz')
        if not os.path.exists(path):
            arrays = os.path.dirname(asset.file(int(scene[len('scene_'):]), 'points'))
            np.savez(path, **{name[:-len('.npy')]: np.load(os.path.join(arrays, name))
                              for name in sorted(os.listdir(arrays))})
    return paths


def reference_dataset(checkout: str, kind: str, root: str, camera: str,
                      frames: Sequence[Tuple[int, int]], num_points: int, voxel_size: float,
                      work_dir: str) -> Tuple[torch.utils.data.Dataset, Callable]:
    """(dataset, collate_fn) of the original training loader over ``frames`` ((scene, frame),
    in order: index i of the dataset is ``frames[i]``), with its training options."""
    module = _import_dataset(checkout, kind)
    dataset = module.GraspNetDataset.__new__(module.GraspNetDataset)
    scenes = sorted({f'scene_{s:04d}' for s, _ in frames})
    options = dict(root=root, split='train', num_points=num_points, camera=camera,
                   remove_outlier=True, augment=True, load_label=True, collision_labels={})
    if kind != 'graspnet-baseline':
        options['voxel_size'] = voxel_size
    dataset.__dict__.update(options)
    lists = {name: [] for name in ('colorpath', 'depthpath', 'labelpath', 'metapath',
                                   'graspnesspath', 'scenename', 'frameid')}
    for scene, frame in frames:
        name, folder = f'scene_{scene:04d}', os.path.join(root, 'scenes', f'scene_{scene:04d}',
                                                          camera)
        for kind_dir, key in (('rgb', 'colorpath'), ('depth', 'depthpath'),
                              ('label', 'labelpath')):
            lists[key].append(os.path.join(folder, kind_dir, f'{frame:04d}.png'))
        lists['metapath'].append(os.path.join(folder, 'meta', f'{frame:04d}.mat'))
        lists['graspnesspath'].append(os.path.join(root, 'graspness', name, camera,
                                                   f'{frame:04d}.npy'))
        lists['scenename'].append(name)
        lists['frameid'].append(frame)
    dataset.__dict__.update(lists)
    if kind == 'graspnet-baseline':
        dataset.remove_invisible = True
        dataset.collision_labels = _collision_labels(root, scenes)
        dataset.valid_obj_idxs, dataset.grasp_labels = [], {}
        for obj in _object_ids(root):
            if obj == 18:
                continue
            dataset.valid_obj_idxs.append(obj + 1)
            with np.load(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz')) as label:
                dataset.grasp_labels[obj + 1] = (
                    label['points'].astype(np.float32), label['offsets'].astype(np.float32),
                    label['scores'].astype(np.float32),
                    np.load(os.path.join(root, 'tolerance', f'{obj:03d}_tolerance.npy')))
        return dataset, module.collate_fn
    if kind == 'graspness_implementation':
        dataset.collision_labels = _collision_labels(root, scenes)
        dataset.grasp_labels = {}
        for obj in _object_ids(root):
            with np.load(os.path.join(root, 'grasp_label', f'{obj:03d}_labels.npz')) as label:
                dataset.grasp_labels[obj + 1] = (
                    label['points'].astype(np.float32),
                    label['offsets'][..., 2].astype(np.float32),
                    label['scores'].astype(np.float32))
        return dataset, module.minkowski_collate_fn
    dataset.remove_invisible = True
    dataset.grasp_labels = _economic_label_files(
        root, scenes, os.path.join(work_dir, 'economic_grasp_label_300views'))
    return dataset, module.collate_fn


def seed_worker(worker_id: int) -> None:
    """The training scripts' ``my_worker_init_fn``: numpy's global stream per worker."""
    np.random.seed(np.random.get_state()[1][0] + worker_id)
