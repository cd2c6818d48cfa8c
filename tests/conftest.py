"""Shared fixtures: one small synthetic dataset per session (and a copy whose duplicated
instances collide differently), a private label-store cache.

The session dataset is read-only for tests: after every test, the files of each session
dataset created so far are compared with their (size, mtime) at creation, and at the end of
the session with their content hashes; a test that wrote, added or removed a file fails,
naming the files. Copy the dataset to ``tmp_path`` before changing it.

Under pytest-xdist the session datasets (and the trainings of tests/integration/conftest.py)
are built once per run, not once per test process: ``_run_wide.run_wide`` builds them in the
first process that asks, under a lock, and the others reuse the folder.
"""
import hashlib
import json
import os
import random
import shutil
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope

from mmgrasp.datasets.synthetic import write_synthetic_dataset

from _run_wide import run_wide

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if os.environ.get('PYTEST_XDIST_WORKER'):
    # setup.cfg's ``-n 2``: two test processes share the cores, so each keeps one intra-op
    # thread; two threads each would wait on threads the other process holds
    torch.set_num_threads(1)

# A grid whose V·A·D (45) is not a multiple of 8, so packed collision rows end mid-byte.
SMALL_GRID = (5, 3, 3)

# (root, {relative path: (size, mtime_ns)}) of every session dataset created so far
_read_only_roots: List[Tuple[str, Dict[str, Tuple[int, int]]]] = []


def tree_stats(root: str) -> Dict[str, Tuple[int, int]]:
    """(size, mtime_ns) of every file under ``root``, by relative path."""
    stats = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            st = os.stat(path)
            stats[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return stats


def _read_only(root: str) -> None:
    """Check ``root`` after every test (see ``_session_data_unchanged``)."""
    _read_only_roots.append((root, tree_stats(root)))


def tree_hashes(root: str) -> Dict[str, str]:
    """sha1 of every file under ``root``, by relative path."""
    hashes = {}
    for rel in tree_stats(root):
        with open(os.path.join(root, rel), 'rb') as f:
            hashes[rel] = hashlib.sha1(f.read()).hexdigest()
    return hashes


def changed_files(before: Dict[str, object], after: Dict[str, object]) -> List[str]:
    """Files added, removed or different between two snapshots, described."""
    return ([f'{rel} (changed)' for rel in sorted(before.keys() & after.keys())
             if before[rel] != after[rel]]
            + [f'{rel} (added)' for rel in sorted(after.keys() - before.keys())]
            + [f'{rel} (removed)' for rel in sorted(before.keys() - after.keys())])


def pytest_collection_modifyitems(config, items):
    """Test files holding a slow test run first, the others after, each group in collection
    order. pytest-xdist hands out whole files in this order (``--no-loadscope-reorder`` in
    setup.cfg; its default order, by number of tests, started the one-test trainings last),
    so the long files start early and the short ones even out the two processes' ends."""
    slow = {item.nodeid.split('::')[0] for item in items if item.get_closest_marker('slow')}
    items.sort(key=lambda item: item.nodeid.split('::')[0] not in slow)  # stable: files stay whole


@pytest.fixture(autouse=True)
def _mmgrasp_default_scope():
    """Every test starts in mmgrasp's default scope, whatever ran before it in the process: a
    Runner leaves its scope current (mmengine's by default), which would send the next test's
    registry builds to that scope's registries."""
    scopes = DefaultScope._instance_dict
    if 'mmgrasp' in scopes:
        scopes.move_to_end('mmgrasp')  # the last created is the current one
    else:
        DefaultScope.get_instance('mmgrasp', scope_name='mmgrasp')


def _seed_global_generators() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The module and session fixtures a test sets up start from seeded global generators too
    (see :func:`_seeded_global_generators`)."""
    _seed_global_generators()


@pytest.fixture(autouse=True)
def _seeded_global_generators():
    """Every test starts from the same state of the global generators (torch's, numpy's legacy
    one and Python's, seeded 0), whatever ran before it in its process: pytest-xdist hands the
    files to the processes by load, so an unseeded draw would otherwise change from run to
    run. The fixtures of a wider scope it sets up drew after the same seeding."""
    _seed_global_generators()


@pytest.fixture(autouse=True)
def _point_op_dispatch_unchanged(request):
    """Fail the test that left the point ops' dispatch replaced (the launch counter's stand-ins
    replace it for the whole process): later tests in the process would run the stand-ins."""
    from mmgrasp.ops import point_normals, point_ops
    before = point_ops._kernels_for, point_normals.kernels_for
    yield
    if (point_ops._kernels_for, point_normals.kernels_for) != before:
        point_ops._kernels_for, point_normals.kernels_for = before
        pytest.fail(f'{request.node.nodeid} left the point ops\' dispatch replaced (undo it: '
                    f'monkeypatch.setattr before installing)', pytrace=False)


@pytest.fixture(autouse=True)
def _session_data_unchanged(request):
    """Fail the test that changed a session dataset (cheap: stat calls only)."""
    yield
    for root, stats in _read_only_roots:
        changed = changed_files(stats, tree_stats(root))
        if changed:
            stats.clear()
            stats.update(tree_stats(root))  # report each change once, in the test that made it
            pytest.fail(f'{request.node.nodeid} changed the session dataset {root} (copy it to '
                        f'tmp_path first): {", ".join(changed)}', pytrace=False)


@pytest.fixture(scope='session', autouse=True)
def _private_cache(tmp_path_factory):
    """Label stores of the test session go to a temporary cache, never the user's."""
    old = os.environ.get('MMGRASP_CACHE')
    os.environ['MMGRASP_CACHE'] = str(tmp_path_factory.mktemp('mmgrasp_cache'))
    yield
    if old is None:
        os.environ.pop('MMGRASP_CACHE', None)
    else:
        os.environ['MMGRASP_CACHE'] = old


@pytest.fixture(scope='session')
def synthetic_root(tmp_path_factory):
    """2 scenes × 3 frames, 4 objects per scene, one model twice in scene 0, small grid; μ kept
    for chords up to 0.14 m (as in the real labels) so the recipes' 0.1 m width mask acts."""
    from mmgrasp.datasets.graspness import generate_graspness, open_reader
    from mmgrasp.storage import open_label_store

    def build(folder):
        root = os.path.join(folder, 'graspnet')
        write_synthetic_dataset(root, scenes=2, frames=3, objects=4, points_per_object=60,
                                grid=SMALL_GRID, image_size=(320, 180), cameras=('realsense',),
                                duplicates=1, seed=0, progress=False, max_label_width=0.14)
        generate_graspness(root)

    root = os.path.join(run_wide(tmp_path_factory, 'synthetic', build), 'graspnet')
    open_label_store(open_reader(root, 'realsense'))  # in this process's cache, as built here
    _read_only(root)
    hashes = tree_hashes(root)
    yield root
    changed = changed_files(hashes, tree_hashes(root))
    if changed:
        pytest.fail(f'the session dataset {root} changed during the session: {", ".join(changed)}',
                    pytrace=False)


@pytest.fixture(scope='session')
def distinct_instances_root(synthetic_root, tmp_path_factory):
    """A copy of the session dataset in which a neighbouring box blocks every free grasp (μ > 0,
    no collision yet) of the duplicated model's second instance in scene 0: that instance's
    mask (its ``arr_i`` of collision_labels.npz, the real format) gains those cells, graspness
    follows. On the session data both instances only self-collide, so their masks
    are equal and a store serving the first instance's collision rows to the second would pass
    every check. Read-only, like the session dataset."""
    from mmgrasp.datasets.graspness import generate_graspness
    from mmgrasp.datasets.graspnet_reader import GraspNetReader

    def build(folder):
        root = os.path.join(folder, 'graspnet')
        shutil.copytree(synthetic_root, root)
        ids = list(GraspNetReader(root).load_meta(0, 0).object_ids)
        first, second = [i for i, o in enumerate(ids) if ids.count(o) > 1]
        path = os.path.join(root, 'collision_label', 'scene_0000', 'collision_labels.npz')
        with np.load(path) as npz:
            masks = [npz[f'arr_{i}'] for i in range(len(npz.files))]
        with np.load(os.path.join(root, 'grasp_label', f'{ids[second]:03d}_labels.npz')) as npz:
            free = (npz['scores'] > 0) & ~masks[second]
        masks[second] = masks[second] | free
        assert not np.array_equal(masks[first], masks[second])
        np.savez(path, *masks)
        generate_graspness(root, scenes=[0], cache_dir=os.path.join(folder, 'store'),
                           overwrite=True)

    root = os.path.join(run_wide(tmp_path_factory, 'distinct_instances', build), 'graspnet')
    _read_only(root)
    return root


@pytest.fixture(scope='session')
def gc6d_root(tmp_path_factory):
    """A GraspClutter6D-layout session dataset: train scenes 1-2 and test scene 3, 3 annotations
    of each of the four cameras, 4 instances a scene, one model twice in scenes 1 and 2, the
    small grid. As in ``distinct_instances_root``, a neighbouring box blocks every free grasp
    of the duplicated model's second instance in scene 1 (its ``arr_i`` gains those cells;
    graspness of the d435, which 'realsense' names, follows), so serving one instance's rows to
    the other fails the checks. Read-only."""
    from mmgrasp.datasets.graspness import generate_graspness
    from mmgrasp.datasets.synthetic.gc6d import write_graspclutter6d_dataset

    def build(folder):
        root = os.path.join(folder, 'graspclutter6d')
        write_graspclutter6d_dataset(root, scenes=2, test_scenes=1, frames=3, objects=4,
                                     points_per_object=60, grid=SMALL_GRID,
                                     image_size=(320, 180), seed=0, progress=False,
                                     max_label_width=0.14)
        with open(os.path.join(root, 'scenes', '000001', 'scene_gt.json')) as f:
            ids = [i['obj_id'] for i in json.load(f)['2']]
        first, second = [i for i, o in enumerate(ids) if ids.count(o) > 1]
        path = os.path.join(root, 'collision_label', '000001.npz')
        with np.load(path) as npz:
            masks = [npz[f'arr_{i}'] for i in range(len(npz.files))]
        with np.load(os.path.join(root, 'grasp_label', f'obj_{ids[second]:06d}_labels.npz')
                     ) as npz:
            masks[second] = masks[second] | ((npz['scores'] > 0) & ~masks[second])
        assert not np.array_equal(masks[first], masks[second])
        np.savez(path, *masks)
        generate_graspness(root, cache_dir=os.path.join(folder, 'store'))

    root = os.path.join(run_wide(tmp_path_factory, 'gc6d', build), 'graspclutter6d')
    _read_only(root)
    return root


@pytest.fixture(scope='session')
def golden_dataset(tmp_path_factory):
    """``golden_dataset(args)``: the dataset ``tools/data/make_synthetic.py ROOT *args`` writes
    (the command a golden's record gives), run on the first request for those arguments and
    kept for the session: the evaluation goldens that share a dataset build it once. Read-only."""
    import subprocess
    import sys

    roots = {}

    def build(args: List[str]) -> str:
        key = tuple(args)
        if key not in roots:
            def write(folder):
                subprocess.run([sys.executable, os.path.join(REPO, 'tools', 'data',
                                                             'make_synthetic.py'),
                                os.path.join(folder, 'synthetic'), *args, '--quiet'],
                               check=True, cwd=REPO,
                               env={**os.environ, 'PYTHONPATH': os.pathsep.join(
                                   [REPO, os.environ.get('PYTHONPATH', '')])})

            name = 'golden_' + hashlib.sha1('\0'.join(args).encode()).hexdigest()[:16]
            root = os.path.join(run_wide(tmp_path_factory, name, write), 'synthetic')
            _read_only(root)
            roots[key] = root
        return roots[key]

    return build


@pytest.fixture(scope='session')
def make_dataset(synthetic_root):
    """Factory of GraspNetDataset on the synthetic data (or ``root``) with a training-like
    pipeline."""
    from mmgrasp.datasets import GraspNetDataset

    def make(grids: str, num_points: int = 1500, augment: bool = True,
             root: Optional[str] = None, **label_options):
        pipeline = [dict(type='LoadGraspScene', num_points=num_points, with_graspness=True),
                    dict(type='SampleGraspLabels', grids=grids, min_points=10,
                         min_object_points=20, **label_options)]
        if augment:
            pipeline.append(dict(type='RandomFlipRotateScene'))
        pipeline.append(dict(type='PackGraspInputs'))
        return GraspNetDataset(root or synthetic_root, pipeline=pipeline, seed=3)

    return make


@pytest.fixture(scope='session')
def small_gsnet_files(synthetic_root, tmp_path_factory) -> Tuple[str, str]:
    """(config, checkpoint) for the tools and APIs that load both (tools/test.py, the demo,
    browse_dataset, GraspInferencer): configs/gsnet_demo.py shrunk to the session dataset's
    5 x 3 x 3 grid, its train and test loaders on the session frames, and the initial weights
    (seed 0)."""
    import torch
    from mmengine.config import Config

    from mmgrasp.registry import MODELS, build_in_scope
    from mmgrasp.apis import register_all_modules

    tmp = tmp_path_factory.mktemp('small_gsnet')
    config, checkpoint = str(tmp / 'small_gsnet.py'), str(tmp / 'init.pth')
    with open(config, 'w') as f:
        f.write(f"""
_base_ = ['{REPO}/configs/gsnet_demo.py']
model = dict(num_seeds=32, num_views=5, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=5),
             # the fingers of initial weights are narrow: a threshold that keeps some grasps
             test_cfg=dict(collision_thresh=0.1))
train_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{synthetic_root}', pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_graspness=True),
        dict(type='SampleGraspLabels', min_object_points=20, grids='dense'),
        dict(type='RandomFlipRotateScene'),
        dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]))
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{synthetic_root}', split='train', pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
        dict(type='PackGraspInputs', keys=('points', ),
             meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
""")
    register_all_modules(False)
    torch.manual_seed(0)
    model = build_in_scope(MODELS, Config.fromfile(config).model)
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    return config, checkpoint


@pytest.fixture(scope='session')
def tiny_gsnet():
    """Factory of a small GSNet for the synthetic 5 x 3 x 3 grid; same weights every call."""
    import torch

    from mmgrasp.registry import MODELS, build_in_scope

    def build():
        torch.manual_seed(0)
        return build_in_scope(MODELS, dict(
            type='GSNet', num_seeds=64, num_views=5, num_angles=3, num_depths=3,
            backbone=dict(type='SparseUNet14', channels=(8, 8, 16, 16, 16, 8, 8, 8),
                          out_channels=32),
            crop=dict(channels=(32, 32)),
            assigner=dict(type='NearestLabelAssigner', num_views=5)))

    return build


@pytest.fixture
def s3_server(monkeypatch):
    """moto's S3 on 127.0.0.1 with a bucket of its own; the environment a client of it reads
    (dummy credentials, its endpoint) is set for the test."""
    from servers.s3_server import S3Server, s3_environment
    with S3Server() as server:
        for name in ('AWS_PROFILE', 'AWS_SESSION_TOKEN', 'AWS_SECURITY_TOKEN'):
            monkeypatch.delenv(name, raising=False)
        for name, value in s3_environment(server).items():
            monkeypatch.setenv(name, value)
        yield server
