"""MatchedLabels are bit-identical between dense and deferred labels, for every combination of
NearestLabelAssigner's options and for ScaleBalancedAssigner; and they agree with a brute-force
numpy computation from the raw npz files."""
import itertools

import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.models.assigners import (NearestLabelAssigner, ScaleBalancedAssigner,
                                      compute_scale_statistic)
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.structures.matched_labels import GRID_FIELDS

OPTIONS = ('all_view_widths', 'with_tolerance', 'view_graspness', 'gsnet_score_norm',
           'distance_cutoff')
FRAMES = [(0, 0), (0, 2), (1, 4)]  # scene 0 frames hold one model twice
NUM_SEEDS = 48
BRUTE_FORCE_FRAMES = [(0, 0), (1, 2), (1, 4)]  # frame 2 of scene 0 has seeds on both twins
NUM_VIEWS = 5


def _batch(dataset):
    data = pseudo_collate([dataset[i] for i in FRAMES])
    return GraspDataPreprocessor()(data, training=True)['inputs']


def _seeds_and_views(inputs):
    g = torch.Generator().manual_seed(0)
    points = inputs['points']
    index = torch.stack([torch.randperm(points.shape[1], generator=g)[:NUM_SEEDS]
                         for _ in range(len(points))])
    seeds = torch.gather(points, 1, index[..., None].expand(-1, -1, 3))
    top_view = torch.randint(0, NUM_VIEWS, (len(points), NUM_SEEDS), generator=g)
    return seeds, top_view


@pytest.fixture(scope='module')
def batches(make_dataset):
    out = {}
    for grids in ('dense', 'deferred'):
        inputs = _batch(make_dataset(grids, tolerance=True))
        out[grids] = (inputs, *_seeds_and_views(inputs))
    return out


def _run(assigner, inputs, seeds, top_view):
    matched = assigner.assign(seeds, inputs['grasp_labels'])
    return assigner.match_view(matched, top_view, inputs['grasp_labels'])




def _assert_identical(a, b, summaries: bool = True):
    """Every field equal bit for bit; with ``summaries``, ``b`` is the matched-cell path and
    carries no grid-sized field."""
    for (name, x), (_, y) in zip(a.items(), b.items()):
        if summaries and name in GRID_FIELDS:
            assert y is None, f'{name}: a grid-sized field on the matched-cell path'
            continue
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and torch.equal(x, y), name


def _differs(a, b) -> bool:
    for (_, x), (_, y) in zip(a.items(), b.items()):
        if (x is None) != (y is None) or (x is not None and (x.shape != y.shape
                                                             or not torch.equal(x, y))):
            return True
    return False


@pytest.mark.parametrize('flags', list(itertools.product((False, True), repeat=5)),
                         ids=lambda f: ''.join('1' if x else '0' for x in f))
def test_all_option_combinations_identical(batches, flags):
    options = dict(zip(OPTIONS, flags), num_views=NUM_VIEWS, max_distance=0.02)
    results = [_run(NearestLabelAssigner(**options), *batches[g]) for g in ('dense', 'deferred')]
    _assert_identical(*results)
    assert results[0].valid.any()


@pytest.mark.parametrize('flags', [(True, True, False, False, True), (False, False, True, True,
                                                                       False)],
                         ids=lambda f: ''.join('1' if x else '0' for x in f))
def test_whole_row_path_of_deferred_labels_identical(batches, flags, monkeypatch):
    """Deferred labels matched through whole rows (a store without μ codes, or a view
    graspness threshold the summaries were not built for) give the dense grids too."""
    options = dict(zip(OPTIONS, flags), num_views=NUM_VIEWS, max_distance=0.02)
    dense = _run(NearestLabelAssigner(**options), *batches['dense'])
    monkeypatch.setattr(NearestLabelAssigner, '_reads_summaries', lambda self, labels: False)
    rows = _run(NearestLabelAssigner(**options), *batches['deferred'])
    _assert_identical(dense, rows, summaries=False)


def test_refused_log_ratio_check_falls_back_to_the_grids(batches, monkeypatch):
    """When the host check of the value tables refuses the summaries (neighbouring μ whose
    ln(u_max / μ) a device might tie), BL's and SBG's targets come from the grids of the
    matched rows instead: the same values as the dense labels, grid fields filled."""
    from mmgrasp.models.assigners import nearest_label_assigner
    statistic = dict(interval=[0.0, 0.05, 0.1], num=[1.0, 2.0])
    make = (lambda: NearestLabelAssigner(num_views=NUM_VIEWS, all_view_widths=True,
                                         with_tolerance=True, view_graspness=False,
                                         gsnet_score_norm=False),
            lambda: ScaleBalancedAssigner(scale_statistic=statistic, num_views=NUM_VIEWS))
    dense = [_run(m(), *batches['dense']) for m in make]
    monkeypatch.setattr(nearest_label_assigner, 'log_ratio_decreasing', lambda tables: False)
    for want, m in zip(dense, make):
        got = _run(m(), *batches['deferred'])
        assert got.score_labels is not None
        _assert_identical(want, got, summaries=False)


@pytest.mark.parametrize('option', OPTIONS)
def test_every_option_changes_the_output(batches, option):
    base = dict(all_view_widths=False, with_tolerance=False, view_graspness=False,
                gsnet_score_norm=False, distance_cutoff=False)
    a = _run(NearestLabelAssigner(num_views=NUM_VIEWS, max_distance=0.02, **base),
             *batches['deferred'])
    b = _run(NearestLabelAssigner(num_views=NUM_VIEWS, max_distance=0.02,
                                  **dict(base, **{option: True})), *batches['deferred'])
    assert _differs(a, b)


def test_scale_balanced_identical_with_identical_statistic(make_dataset, batches):
    statistics = [compute_scale_statistic(make_dataset(g, tolerance=True), num_frames=4)
                  for g in ('dense', 'deferred')]
    assert statistics[0] == statistics[1] and sum(statistics[0]['num']) > 0
    statistic = dict(statistics[0], num=[n + 1 for n in statistics[0]['num']])
    results = [_run(ScaleBalancedAssigner(scale_statistic=statistic, num_views=NUM_VIEWS),
                    *batches[g]) for g in ('dense', 'deferred')]
    _assert_identical(*results)
    assert results[1].best_width is not None and results[1].score_labels is None
    assert results[0].scale_weight.shape == (len(FRAMES), NUM_SEEDS)
    assert (results[0].scale_weight >= 1).all()


def test_storage_made_to_differ_is_caught(batches):
    """The identity check can fail: flip one deferred record's rows and it does."""
    inputs, seeds, top_view = batches['deferred']
    labels = inputs['grasp_labels']
    record = labels.objects[0].deferred
    original = record.rows.copy()
    try:
        object.__setattr__(record, 'rows', original[::-1].copy())
        assigner = NearestLabelAssigner(num_views=NUM_VIEWS)
        with pytest.raises(AssertionError):
            _assert_identical(_run(assigner, *batches['dense']),
                              _run(assigner, inputs, seeds, top_view))
    finally:
        object.__setattr__(record, 'rows', original)


def _fibonacci_views(n):
    phi = (np.sqrt(5) - 1) / 2
    i = np.arange(n)
    z = (2 * i + 1) / n - 1
    r = np.sqrt(1 - z ** 2)
    return np.stack([r * np.cos(2 * np.pi * i * phi), r * np.sin(2 * np.pi * i * phi), z], -1)


def _meta_instances(meta, poses, object_ids):
    """Meta position of each label of one frame, from its (augmented) pose alone: a model
    present once fixes the frame's augmentation M = R_label R_meta^T, and each label is the
    instance of its model whose meta pose M maps onto the label's pose."""
    ids = list(meta.object_ids)
    once = next(k for k, o in enumerate(object_ids) if ids.count(o) == 1)
    m = poses[once][:, :3] @ meta.poses[ids.index(object_ids[once])][:, :3].T.astype(np.float64)
    instances = []
    for pose, obj in zip(poses, object_ids):
        error = np.array([np.abs(m @ meta.poses[i] - pose).max() if ids[i] == obj else np.inf
                          for i in range(len(ids))])
        best = int(np.argmin(error))
        assert error[best] < 1e-5 and (np.sort(error)[1:] > 1e-3).all(), error
        instances.append(best)
    return instances


def test_against_brute_force_from_npz(make_dataset, distinct_instances_root, monkeypatch):
    """On the copy whose duplicated instances collide differently (tests/conftest.py): the
    nearest label point, view re-indexing, μ with the instance's collisions zeroed and widths,
    from the raw files; the instance is found by pose, not by the record's collision_offset.
    These are the grids of the whole-row path of deferred labels (the summaries have their own
    value tests in tests/unit/storage/test_view_summaries.py)."""
    monkeypatch.setattr(NearestLabelAssigner, '_reads_summaries', lambda self, labels: False)
    root = distinct_instances_root
    dataset = make_dataset('deferred', tolerance=True, root=root)
    data = pseudo_collate([dataset[i] for i in BRUTE_FORCE_FRAMES])
    frames = [(s.metainfo['scene'], s.metainfo['frame']) for s in data['data_samples']]
    inputs = GraspDataPreprocessor()(data, training=True)['inputs']
    seeds, top_view = _seeds_and_views(inputs)
    labels = inputs['grasp_labels']
    matched = _run(NearestLabelAssigner(num_views=NUM_VIEWS, all_view_widths=True),
                   inputs, seeds, top_view)
    reader = GraspNetReader(root)
    views = _fibonacci_views(NUM_VIEWS)
    checked = told_apart = 0
    for b, (scene, frame) in enumerate(frames):
        frame_objects = [o for o in range(labels.num_objects) if labels.object_frame[o] == b]
        poses = [labels.poses[o].double().numpy() for o in frame_objects]
        meta = reader.load_meta(scene, frame)
        instance_of = dict(zip(frame_objects, _meta_instances(
            meta, poses, [labels.objects[o].object_id for o in frame_objects])))
        candidates = []  # (camera point, object index, row)
        for o, pose in zip(frame_objects, poses):
            points = labels.objects[o].points.double().numpy() @ pose[:, :3].T + pose[:, 3]
            candidates += [(p, o, r) for r, p in enumerate(points)]
        camera = np.stack([c[0] for c in candidates])
        for s in range(NUM_SEEDS):
            seed = seeds[b, s].double().numpy()
            nearest = int(np.argmin(((camera - seed) ** 2).sum(1)))
            _, o, r = candidates[nearest]
            assert (matched.object_index[b, s], matched.row[b, s]) == (o, r)
            object_id = labels.objects[o].object_id
            label = reader.load_grasp_label(object_id)
            file_row, = np.flatnonzero((label['points'] == labels.objects[o].points[r].numpy())
                                       .all(1))  # the npz row of this label point
            masks = reader.load_collision(scene)
            collision = masks[instance_of[o]][file_row]
            mu = label['scores'][file_row].copy()
            mu[collision] = 0
            rotation = labels.poses[o][:, :3].double().numpy()
            rotated = views @ rotation.T
            d = ((views[:, None] - rotated[None]) ** 2).sum(-1)  # (slot, object view)
            object_view = d.argmin(1)
            np.testing.assert_array_equal(matched.view_index[b, s].numpy(), object_view)
            assert matched.scores[b, s].numpy().tobytes() == mu[object_view].tobytes()
            assert matched.widths[b, s].numpy().tobytes() == \
                label['widths'][file_row][object_view].tobytes()
            checked += 1
            twins = [i for i, m in enumerate(meta.object_ids)
                     if m == object_id and i != instance_of[o]]
            told_apart += any((masks[i][file_row][object_view] != collision[object_view]).any()
                              for i in twins)
    assert checked == len(BRUTE_FORCE_FRAMES) * NUM_SEEDS
    assert told_apart  # seeds where reading the twin instance's collision rows would show
