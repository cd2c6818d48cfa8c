"""The visible-label test on the data preprocessor's device against the worker's cKDTree test:
the same distances bit for bit (float64), the same rows and label points after the draw."""
import copy
import dataclasses
from unittest import mock

import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from scipy.spatial import cKDTree

from mmgrasp.datasets.transforms import SampleGraspLabels
from mmgrasp.models.assigners.scale_statistic import compute_scale_statistic
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.ops import nearest_squared_distance
from mmgrasp.structures import label_visibility
from mmgrasp.structures.label_visibility import (PendingVisibility, draw_rows,
                                                 resolve_visibility, squared_threshold,
                                                 visible_masks)

FRAMES = [(0, 0), (0, 4), (1, 5)]  # (epoch, index)
OPTIONS = dict(visible_only=True, tolerance=True, num_points=400, augment=False)


def boundary_points(seed: int = 0):
    """Scene points and label points at 1 cm from their nearest one, give or take an ulp."""
    rng = np.random.default_rng(seed)
    scene = rng.uniform(-0.05, 0.05, (300, 3)).astype(np.float32)
    direction = rng.normal(size=(2000, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    nearest = scene[rng.integers(0, 300, 2000)]
    shift = 0.01 * (1 + rng.integers(-3, 4, 2000)[:, None] * 1e-7)
    return scene, (nearest + direction * shift).astype(np.float32)


def test_nearest_squared_distance_is_ckdtree_bit_for_bit():
    scene, labels = boundary_points()
    expected, _ = cKDTree(scene).query(labels, k=1)
    dist2 = nearest_squared_distance(torch.from_numpy(scene).double()[None],
                                     torch.from_numpy(labels).double()[None])[0].numpy()
    assert np.sqrt(dist2).tobytes() == expected.tobytes()
    # the threshold falls among these points, and the squared comparison is the worker's
    inside = expected < 0.01
    assert 0 < inside.sum() < len(inside)
    assert np.array_equal(dist2 < squared_threshold(0.01), inside)
    # mutations: float32 arithmetic (the knn kernels'), or 0.01² as the threshold, select
    # other points than the worker's cKDTree here
    single = nearest_squared_distance(torch.from_numpy(scene)[None],
                                      torch.from_numpy(labels)[None])[0].numpy()
    assert not np.array_equal(single < np.float32(0.01) ** 2, inside)


def test_squared_threshold_is_the_square_root_comparison():
    for distance in (0.01, 0.003, 0.02, 1.0):
        t = squared_threshold(distance)
        assert np.sqrt(t) >= distance > np.sqrt(np.nextafter(t, 0))
    # mutation: 0.01² would call a point at squared distance t visible, the worker does not
    t = squared_threshold(0.01)
    assert t < 0.01 ** 2 and not np.sqrt(t) < 0.01


def dataset_batch(make_dataset, test: str):
    dataset = make_dataset('deferred', visible_test=test, **OPTIONS)
    return pseudo_collate([dataset[f] for f in FRAMES])


@pytest.fixture(scope='module')
def batches(make_dataset):
    return {test: dataset_batch(make_dataset, test) for test in ('worker', 'device')}


def test_the_default_is_the_device_with_deferred_grids_only():
    assert SampleGraspLabels(visible_only=True).visible_test == 'device'
    assert SampleGraspLabels(visible_only=True, grids='dense').visible_test == 'worker'
    with pytest.raises(ValueError, match="visible_test='device' needs grids='deferred'"):
        SampleGraspLabels(grids='dense', visible_test='device')
    with pytest.raises(ValueError, match='expected one of'):
        SampleGraspLabels(visible_test='gpu')


def test_device_test_keeps_the_worker_rows(batches):
    worker, device = batches['worker'], batches['device']
    pending = [s.grasp_label_visibility for s in device['data_samples']]
    assert all('grasp_label_visibility' not in s for s in worker['data_samples'])
    # the worker shipped every label point of each object, flat, and the object's points
    for sample, record in zip(device['data_samples'], pending):
        counts = [o.num_points for o in sample.grasp_labels]
        assert record.label_counts.tolist() == counts and len(record.label_points) == sum(counts)
        assert len(record.scene_points) == int(record.scene_counts.sum()) > 0
    # copies: the fixture is shared by the tests of this module
    outputs = {name: GraspDataPreprocessor()(copy.deepcopy(batch), True)
               for name, batch in batches.items()}
    ref, got = outputs['worker']['inputs']['grasp_labels'], outputs['device']['inputs'][
        'grasp_labels']
    for field in ('points', 'poses', 'point_object', 'point_row', 'object_ids'):
        assert torch.equal(getattr(ref, field), getattr(got, field)), field
    assert [o.deferred.rows.tobytes() for o in ref.objects] == \
           [o.deferred.rows.tobytes() for o in got.objects]
    # the samples stay as the worker made them: a batch run twice is tested twice
    assert all('grasp_label_visibility' in s for s in outputs['device']['data_samples'])
    # the test removed label points (not merely the draw): fewer candidates than points
    visible = []
    for r in pending:
        labels = np.split(r.label_points.numpy(), np.cumsum(r.label_counts)[:-1])
        scene = np.split(r.scene_points.numpy(), np.cumsum(r.scene_counts)[:-1])
        visible += [cKDTree(s).query(q)[0] < 0.01 for q, s in zip(labels, scene)]
    assert any(0 < v.sum() < len(v) for v in visible)
    kept = [o.num_points for o in got.objects]
    assert kept == [min(max(int(v.sum() * 0.25), 10), v.sum()) for v in visible]


def test_the_cuda_pass_and_the_cpu_kd_tree_give_the_same_masks(batches):
    """The brute-force float64 pass (what a CUDA device runs, here on CPU tensors) against
    the cKDTree the preprocessor runs on a CPU device."""
    records = [s.grasp_label_visibility for s in batches['device']['data_samples']]
    passes = {kd: visible_masks(records, 'cpu', kd_tree=kd) for kd in (False, True)}
    assert [[m.tobytes() for m in f] for f in passes[False]] == \
           [[m.tobytes() for m in f] for f in passes[True]]
    assert any(not m.all() for f in passes[False] for m in f)
    # the preprocessor's option chooses the pass (the launch counter's CUDA path sets False)
    assert GraspDataPreprocessor().visible_kd_tree is None
    chosen = []
    original = label_visibility.visible_masks
    with mock.patch.object(label_visibility, 'visible_masks',
                           lambda r, d, kd=None: chosen.append(kd) or original(r, d, kd)):
        for kd in (False, None):
            GraspDataPreprocessor(visible_kd_tree=kd)(copy.deepcopy(batches['device']), True)
    assert chosen == [False, None]


def test_the_cuda_pass_reads_the_device_once(batches):
    """Counted as the launch counter counts: the preprocess makes one host read (the masks)."""
    from torch.profiler import ProfilerActivity, profile

    from mmgrasp.analysis import dispatch_count
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        GraspDataPreprocessor(visible_kd_tree=False)(copy.deepcopy(batches['device']), True)
    parts = dispatch_count.count_events(prof.events())
    assert sum(p['syncs'] for p in parts.values()) == 1


def test_the_rule_is_what_changes_the_rows(batches):
    """Mutations: a wider distance, another seed, another share each change the kept rows."""
    records = [s.grasp_label_visibility for s in batches['device']['data_samples']]
    labels = [s.grasp_labels for s in batches['device']['data_samples']]
    base = resolve_visibility(labels, records, kd_tree=False)
    rows = [[o.deferred.rows.tobytes() for o in frame] for frame in base]
    for change in (dict(distance=0.05), dict(seed=records[0].seed + 1), dict(fraction=0.9)):
        mutated = resolve_visibility(labels, [dataclasses.replace(r, **change) for r in records],
                                     kd_tree=False)
        assert [[o.deferred.rows.tobytes() for o in f] for f in mutated] != rows, change


def test_draw_rows_rule():
    visible = [np.arange(40) % 3 > 0, np.zeros(5, bool), np.ones(8, bool)]
    rows = draw_rows(visible, seed=7, fraction=0.25, min_points=10)
    assert [len(r) for r in rows] == [10, 0, 8]  # max(⌊26/4⌋, 10); none; all of 8 < 10
    assert visible[0][rows[0]].all() and np.all(np.diff(rows[0]) > 0)
    again = draw_rows(visible, seed=7, fraction=0.25, min_points=10)
    assert all(np.array_equal(a, b) for a, b in zip(rows, again))


def test_scale_statistic_reads_the_kept_rows(make_dataset):
    stats = {test: compute_scale_statistic(
        make_dataset('deferred', visible_test=test, **OPTIONS), num_frames=2)
        for test in ('worker', 'device')}
    assert stats['worker'] == stats['device'] and sum(stats['worker']['num']) > 0


def test_pending_record_is_small_and_flat(batches):
    record = batches['device']['data_samples'][0].grasp_label_visibility
    assert isinstance(record, PendingVisibility)
    assert record.label_points.dtype == torch.float32 and record.label_points.dim() == 2
    assert record.scene_points.is_contiguous() and record.label_points.is_contiguous()
