"""EconomicAssigner: dense and deferred rows give identical targets; both equal an independent
numpy implementation of the reference's process_grasp_labels fed from the RAW label files;
mutations of its rules are caught."""
import os
import sys

import numpy as np
import pytest
import torch

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.models.assigners import EconomicAssigner
from mmgrasp.structures.economic_labels import EconomicFrameLabels, read_rows
from mmgrasp.apis import register_all_modules

from _economic_reference import process_frame

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'storage'))
from _economic_helpers import raw_economic_scene  # noqa: E402

register_all_modules()
FRAMES, SEEDS = 4, 96


def pipeline(grids):
    return [dict(type='LoadGraspScene', num_points=2000, with_graspness=True),
            dict(type='LoadEconomicLabels', grids=grids),
            dict(type='RandomFlipRotateScene', flip_prob=0.5, max_rotation=0.0),
            dict(type='PackGraspInputs', keys=('points', 'objectness', 'graspness'))]


@pytest.fixture(scope='module')
def batches(synthetic_root):
    out = {}
    for grids in ('dense', 'deferred'):
        ds = GraspNetDataset(synthetic_root, pipeline=pipeline(grids), seed=3)
        out[grids] = [ds[i] for i in range(FRAMES)]
    return out


def seeds_of(samples, V):
    rng = np.random.default_rng(0)
    seeds, views = [], []
    for s in samples:
        points, objectness = s['inputs']['points'].numpy(), s['inputs']['objectness'].numpy()
        pool = np.flatnonzero(objectness)
        pick = rng.choice(pool, SEEDS, replace=len(pool) < SEEDS)
        seeds.append(points[pick] + rng.normal(0, 0.002, (SEEDS, 3)).astype(np.float32))
        views.append(rng.integers(0, V, SEEDS))
    return torch.from_numpy(np.stack(seeds)), torch.from_numpy(np.stack(views))


def assign(samples):
    frames = [s['data_samples'].economic_labels for s in samples]
    V = frames[0].dense['vgraspness'].shape[1] if frames[0].dense is not None else \
        np.load(frames[0].deferred.file('vgraspness'), mmap_mode='r').shape[1]
    seeds, views = seeds_of(samples, V)
    return EconomicAssigner(num_views=V).assign(seeds, views, frames), seeds, views


def test_dense_equals_deferred_bit_for_bit(batches):
    dense, _, _ = assign(batches['dense'])
    deferred, _, _ = assign(batches['deferred'])
    assert dense.keys() == deferred.keys()
    for key in dense:
        assert dense[key].dtype == deferred[key].dtype, key
        assert torch.equal(dense[key], deferred[key]), key
    assert dense['batch_grasp_rotations'].dtype == torch.int32
    assert dense['batch_grasp_score'].dtype == torch.float32
    assert dense['batch_valid_mask'].any() and not dense['batch_valid_mask'].all()


def raw_objects(root, scene, V):
    raw = raw_economic_scene(root, scene, top_k=V)
    objects = []
    for i in range(int(raw['pointid'].max()) + 1):
        sel = raw['pointid'] == i
        objects.append(dict(points=raw['points'][sel],
                            rotations=raw['rotations'][sel].astype(np.int32),
                            depth=raw['depth'][sel].astype(np.int32),
                            scores=raw['scores'][sel].astype(np.float32) / 10.,
                            widths=raw['widths'][sel].astype(np.float32) / 1000.,
                            topview=raw['topview'][sel].astype(np.int64),
                            vgraspness=raw['vgraspness'][sel]))
    return objects


def reference(synthetic_root, samples, seeds, views, **mutation):
    out = []
    for b, s in enumerate(samples):
        labels = s['data_samples'].economic_labels
        V = labels.dense['vgraspness'].shape[1]
        objects = raw_objects(synthetic_root, s['data_samples'].metainfo['scene'], V)
        out.append(process_frame(seeds[b].numpy(), views[b].numpy(), labels.poses.numpy(),
                                 objects, **mutation))
    return {k: np.stack([o[k] for o in out]) for k in out[0]}


NAMES = dict(rotations='batch_grasp_rotations', depth='batch_grasp_depth',
             scores='batch_grasp_score', widths='batch_grasp_width',
             graspness='batch_grasp_view_graspness', valid='batch_valid_mask')


def differs(mine, ref):
    bad = [k for k, name in NAMES.items() if not np.array_equal(mine[name].numpy(), ref[k])]
    if not np.allclose(mine['batch_grasp_point'].numpy(), ref['point'], atol=1e-6):
        bad.append('point')
    if not np.allclose(mine['batch_grasp_view_rot'].numpy(), ref['view_rot'], atol=1e-5):
        bad.append('view_rot')
    return bad


def test_equals_numpy_reference_from_raw_files(synthetic_root, batches):
    mine, seeds, views = assign(batches['dense'])
    assert differs(mine, reference(synthetic_root, batches['dense'], seeds, views)) == []


@pytest.mark.parametrize('mutation, caught', [
    (dict(last_write_wins=False), 'rotations'),
    (dict(max_distance=0.01), 'valid'),
])
def test_mutations_are_caught(synthetic_root, batches, mutation, caught):
    mine, seeds, views = assign(batches['dense'])
    assert caught in differs(mine, reference(synthetic_root, batches['dense'], seeds, views,
                                             **mutation))


def test_deferred_reads_only_matched_rows(batches):
    frames = [s['data_samples'].economic_labels for s in batches['deferred']]
    rows = np.array([0, 1, 1, 0])
    _, nbytes = read_rows([frames[0].deferred], np.zeros(4, np.int64), rows)
    whole = sum(np.load(frames[0].deferred.file(n), mmap_mode='r').nbytes
                for n in ('rotations', 'depth', 'scores', 'widths', 'topview', 'vgraspness'))
    rows_in_scene = np.load(frames[0].deferred.file('pointid'), mmap_mode='r').shape[0]
    assert nbytes == whole // rows_in_scene * 2  # two distinct rows, each read once


def test_frame_without_label_points_gets_finite_defaults(batches):
    samples = batches['dense'][:2]
    mine, seeds, views = assign(samples)
    good = samples[0]['data_samples'].economic_labels
    empty = EconomicFrameLabels(
        good.points[:0], good.point_instance[:0], good.scene_row[:0], good.poses[:0],
        dense={k: v[:0] for k, v in good.dense.items()})
    V = good.dense['vgraspness'].shape[1]
    out = EconomicAssigner(num_views=V).assign(seeds, views, [good, empty])
    for key, value in out.items():
        if key != 'C: Valid Points':
            assert torch.equal(value[0], mine[key][0]), key
        assert torch.isfinite(value.float()).all(), key
    assert not out['batch_valid_mask'][1].any()
    assert (out['batch_grasp_rotations'][1] == 12).all()
    assert (out['batch_grasp_depth'][1] == 4).all()
    assert (out['batch_grasp_width'][1] == np.float32(0.1)).all()
    assert torch.equal(out['C: Valid Points'] * 2, mine['C: Valid Points'] * 2
                       - (mine['batch_grasp_point'][1] - seeds[1]).norm(dim=-1).lt(0.005).sum())


@pytest.fixture(scope='module')
def paper_grid_root(tmp_path_factory):
    """One scene on the real 300 x 12 x 4 grid, where rotated views often share a template
    view (the reference's last-write-wins case)."""
    from mmgrasp.datasets.graspness import generate_graspness
    from mmgrasp.datasets.synthetic import write_synthetic_dataset
    root = str(tmp_path_factory.mktemp('paper_grid') / 'graspnet')
    write_synthetic_dataset(root, scenes=1, frames=2, objects=3, points_per_object=40,
                            grid=(300, 12, 4), image_size=(320, 180), cameras=('realsense',),
                            duplicates=1, seed=0, progress=False, max_label_width=0.14)
    generate_graspness(root, cache_dir=str(tmp_path_factory.mktemp('paper_store')))
    return root


@pytest.mark.slow
def test_paper_grid_dense_deferred_and_reference(paper_grid_root):
    samples = {g: [GraspNetDataset(paper_grid_root, pipeline=pipeline(g), seed=3)[i]
                   for i in range(2)] for g in ('dense', 'deferred')}
    dense, seeds, views = assign(samples['dense'])
    deferred, _, _ = assign(samples['deferred'])
    for key in dense:
        assert torch.equal(dense[key], deferred[key]), key
    assert dense['batch_valid_mask'].any()
    ref = reference(paper_grid_root, samples['dense'], seeds, views)
    assert differs(dense, ref) == []
    mutated = reference(paper_grid_root, samples['dense'], seeds, views, last_write_wins=False)
    assert 'valid' in differs(dense, mutated)  # shared template views decide matches here


def test_one_transfer_packing_is_lossless(batches):
    from mmgrasp.structures.economic_labels import to_device_once
    frames = [s['data_samples'].economic_labels for s in batches['deferred']]
    arrays, _ = read_rows([f.deferred for f in frames], np.array([0, 1, 2, 3, 0]),
                          np.array([3, 1, 2, 0, 3]))
    packed = to_device_once(arrays, 'cpu')
    for name, array in arrays.items():
        assert packed[name].dtype == torch.from_numpy(array).dtype
        assert torch.equal(packed[name], torch.from_numpy(array)), name
