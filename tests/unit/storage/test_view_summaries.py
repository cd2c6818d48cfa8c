"""The label store's matched-cell assets against the dense grids of the raw files: μ codes and
their value tables (lossless), every per-view summary (per object without collisions, per scene
instance with them), and the matched-cell reads (summaries re-indexed by view, cells of one
view with the collision bits of that view) against whole-row reads. The session grid is
5 × 3 × 3: V·A·D = 45 and A·D = 9 are not multiples of 8, so a view's collision bits straddle
bytes; scene 0 holds one model twice (two instances, two collision row ranges)."""
import inspect
import os
import shutil
import textwrap

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.labels import summaries as view_summaries
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.store import build_label_store
from mmgrasp.structures.grasp_labels import (ObjectGraspLabels, gather_grids,
                                             gather_view_cells, gather_view_summaries,
                                             reads_matched_cells)

MAX_MU, MAX_WIDTH = np.float32(0.6), np.float32(0.1)


@pytest.fixture(scope='module')
def store(synthetic_root, tmp_path_factory):
    return build_label_store(GraspNetReader(synthetic_root),
                             str(tmp_path_factory.mktemp('summaries')))


def _instances(root):
    """(scene, object id, collision row offset, (n, V, A, D) collision) of every instance."""
    reader = GraspNetReader(root)
    out = []
    for scene in (0, 1):
        ids = list(reader.load_meta(scene, 0).object_ids)
        masks = reader.load_collision(scene)
        offset = 0
        for obj, mask in zip(ids, masks):
            out.append((scene, int(obj), offset, mask))
            offset += len(mask)
    return out


def _brute_force(mu, widths):
    """Every summary of one (row, view): lists of cells in (A, D) order, plain Python."""
    mu, widths = mu.ravel().tolist(), widths.ravel().tolist()
    cells = range(len(mu))
    masked = [c for c in cells if mu[c] > 0 and np.float32(widths[c]) <= MAX_WIDTH]
    positive = [c for c in cells if mu[c] > 0]
    low = min((mu[c] for c in masked), default=None)
    best = next((c for c in masked if mu[c] == low), None)
    return dict(view_count=sum(1 for c in positive if np.float32(mu[c]) <= MAX_MU),
                view_min_mu=0.0 if low is None else low,
                view_min_mu_any=min((mu[c] for c in positive), default=0.0),
                view_max_mu=max(mu),
                view_best_width=0.0 if best is None else widths[best])


def _check_summaries(folder, mu, widths, table):
    for name in view_summaries.SUMMARY_DTYPES:
        stored = np.load(os.path.join(folder, f'{name}.npy'))
        assert stored.shape == mu.shape[:2], name
        if name in ('view_min_mu', 'view_min_mu_any', 'view_max_mu'):
            stored = np.append(table, np.zeros(256 - len(table), np.float32))[stored]
        for r in range(len(mu)):
            for v in range(mu.shape[1]):
                want = _brute_force(mu[r, v], widths[r, v])[name]
                assert np.float32(stored[r, v]) == np.float32(want), (folder, name, r, v)


def _random_grids(seed=0, n=40, grid=(7, 3, 5)):
    """μ from the dataset's values (mostly −1), widths around 0.1, collisions: every view holds
    several masked μ in no particular order (the physics labels of the session dataset put the
    smallest first), V·A·D = 105, A·D = 15."""
    rng = np.random.default_rng(seed)
    values = np.float32([-1, -1, -1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    mu = values[rng.integers(len(values), size=(n, *grid))]
    widths = rng.uniform(0.05, 0.14, size=(n, *grid)).astype(np.float32)
    return mu, widths, rng.random((n, *grid)) < 0.2


def _check_computed(mu, widths, collided):
    table = view_summaries.score_value_table(mu)
    got = view_summaries.view_summaries(mu, widths, table, collided)
    zeroed = mu if collided is None else np.where(collided, np.float32(0), mu)
    decode = np.append(table, np.zeros(256 - len(table), np.float32))
    for r in range(len(mu)):
        for v in range(mu.shape[1]):
            want = _brute_force(zeroed[r, v], widths[r, v])
            for name, value in want.items():
                stored = got[name][r, v]
                if name in ('view_min_mu', 'view_min_mu_any', 'view_max_mu'):
                    stored = decode[stored]
                assert np.float32(stored) == np.float32(value), (name, r, v)


def test_summaries_of_random_grids_equal_brute_force():
    mu, widths, collided = _random_grids()
    _check_computed(mu, widths, collided)
    _check_computed(mu, widths, None)


SUMMARY_MUTANTS = {
    'best width at the first masked cell': (
        'first = (masked & (m == low[..., None])).argmax(-1)', 'first = masked.argmax(-1)'),
    'count of 0 < μ < 0.6': ('(m <= view_max_mu)', '(m < view_max_mu)'),
    'min μ without the width mask': ('masked = positive & (w <= max_width)',
                                     'masked = positive'),
    'max μ of the first cell': ('_codes_of(m.max(-1),', '_codes_of(m[..., 0],'),
    'collisions not applied': ('where=np.asarray(collided', 'where=~np.asarray(collided'),
}


@pytest.mark.parametrize('mutant', sorted(SUMMARY_MUTANTS))
def test_summary_mutants_are_caught(mutant, monkeypatch):
    old, new = SUMMARY_MUTANTS[mutant]
    source = textwrap.dedent(inspect.getsource(view_summaries.view_summaries))
    assert source.count(old) == 1, f'update the mutant {mutant!r}'
    namespace = dict(vars(view_summaries))
    exec(compile(source.replace(old, new), '<mutant>', 'exec'), namespace)
    monkeypatch.setattr(view_summaries, 'view_summaries', namespace['view_summaries'])
    with pytest.raises(AssertionError):
        _check_computed(*_random_grids())


def test_score_codes_are_lossless(store, synthetic_root):
    reader = GraspNetReader(synthetic_root)
    for obj, entry in store.objects.items():
        assert entry.score_codes
        scores = reader.load_grasp_label(obj)['scores']
        table = np.load(store.object_file(obj, 'score_values'))
        codes = np.load(store.object_file(obj, 'score_codes'))
        assert codes.dtype == np.uint8 and codes.shape == scores.shape
        assert table[codes].tobytes() == scores.tobytes()
        assert len(np.unique(table.view(np.uint32))) == len(table)
        assert 0 in table.view(np.uint32)  # +0.0, which collisions write


def test_object_summaries_equal_dense_grids(store, synthetic_root):
    """collision='none': summaries of the raw μ, per object."""
    reader = GraspNetReader(synthetic_root)
    for obj in store.objects:
        label = reader.load_grasp_label(obj)
        _check_summaries(os.path.dirname(store.object_file(obj, 'points')), label['scores'],
                         label['widths'], np.load(store.object_file(obj, 'score_values')))


def test_scene_summaries_equal_dense_grids_with_collisions(store, synthetic_root):
    """'zero_scores' / 'mask': μ := 0 where the scene collides, per instance (a duplicated
    model's two instances have their own summaries)."""
    reader = GraspNetReader(synthetic_root)
    collided_counts_differ = False
    for scene in store.scenes:
        parts = [(reader.load_grasp_label(obj), mask) for s, obj, _, mask in
                 _instances(synthetic_root) if s == scene]
        mu = np.concatenate([np.where(mask, np.float32(0), label['scores'])
                             for label, mask in parts])
        widths = np.concatenate([label['widths'] for label, _ in parts])
        tables = [np.load(store.object_file(obj, 'score_values'))
                  for s, obj, _, _ in _instances(synthetic_root) if s == scene]
        assert all(np.array_equal(t, tables[0]) for t in tables)  # one table for the check
        folder = os.path.dirname(store.collision_file(scene))
        _check_summaries(folder, mu, widths, tables[0])
        raw = np.concatenate([label['scores'] for label, _ in parts])
        collided_counts_differ |= bool(
            ((raw > 0) & (raw <= MAX_MU)).sum((-2, -1)).tolist()
            != np.load(os.path.join(folder, 'view_count.npy')).tolist())
    assert collided_counts_differ  # the collisions matter to the check


def test_summary_mutant_is_caught(synthetic_root, tmp_path, monkeypatch):
    """The value checks fail on a store built with a wrong summary (first masked cell's width
    instead of the first best one's; count of μ < 0.6)."""
    original = view_summaries.view_summaries

    def wrong(mu, widths, table, collided=None):
        out = original(mu, widths, table, collided)
        m = np.array(mu, np.float32).reshape(*out['view_count'].shape, -1)
        if collided is not None:
            m[np.asarray(collided).reshape(m.shape)] = 0
        out['view_count'] = ((m > 0) & (m < MAX_MU)).sum(-1).astype(np.uint8)
        return out

    monkeypatch.setattr(view_summaries, 'view_summaries', wrong)
    store = build_label_store(GraspNetReader(synthetic_root), str(tmp_path))
    with pytest.raises(AssertionError):
        test_scene_summaries_equal_dense_grids_with_collisions(store, synthetic_root)


def test_more_than_255_values_keep_float32(synthetic_root, tmp_path):
    """An object whose μ take more than 255 values gets no codes (nor summaries): its records
    say so, and label matching reads its whole rows."""
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    path = os.path.join(root, 'grasp_label', '000_labels.npz')
    with np.load(path) as npz:
        arrays = dict(npz)
    scores = arrays['scores'].astype(np.float32)
    scores.reshape(-1)[:300] = np.float32(0.1) + np.arange(300, dtype=np.float32) * 1e-4
    arrays['scores'] = scores
    np.savez(path, **arrays)
    assert view_summaries.score_value_table(scores) is None
    store = build_label_store(GraspNetReader(root), str(tmp_path / 'cache'))
    assert not store.objects[0].score_codes and store.objects[1].score_codes
    assert not os.path.exists(store.object_file(0, 'score_codes'))
    assert np.load(store.object_file(0, 'scores')).tobytes() == scores.tobytes()
    assert store.manifest['objects']['000']['score_codes'] is False


def _labels(store, mode):
    labels = []
    for scene, entry in sorted(store.scenes.items()):
        for instance, obj in enumerate(entry.object_ids):
            rows = np.arange(store.objects[obj].num_points, dtype=np.int32)[::-1].copy()
            record = StoreGrids(store=store.path, object_id=obj, rows=rows, grid=store.grid,
                                collision_mode=mode, has_tolerance=True, scene=scene,
                                collision_offset=entry.row_offsets[instance],
                                matched_cells=store.objects[obj].score_codes)
            labels.append(ObjectGraspLabels(points=torch.from_numpy(store.points(obj)),
                                            pose=torch.eye(4)[:3], object_id=obj,
                                            collision_mode=mode, deferred=record))
    return labels


def _requests(labels, V, n=700, seed=0):
    g = torch.Generator().manual_seed(seed)
    counts = torch.tensor([len(label.points) for label in labels])
    owner = torch.randint(len(labels), (n,), generator=g)
    rows = (torch.rand(n, generator=g) * counts[owner]).long()
    owner[n // 2:], rows[n // 2:] = owner[:n - n // 2], rows[:n - n // 2]  # shared rows
    return owner, rows, torch.randint(V, (n, V), generator=g)


@pytest.mark.parametrize('mode', ['zero_scores', 'mask', 'none'])
def test_cells_of_one_view_equal_whole_rows(store, mode):
    """μ (one-byte codes), widths, tolerance and the view's collision bits, for every view of
    every request, equal the whole-row reader's cells (collisions not applied: raw)."""
    labels = _labels(store, mode)
    V = store.grid[0]
    owner, rows, views = _requests(labels, V)
    raw = _labels(store, 'none')
    for v in range(V):
        view = views[:, v]
        cells = gather_view_cells(labels, ['scores', 'widths', 'tolerance', 'collision'],
                                  owner, rows, view)
        for name in ('scores', 'widths', 'tolerance'):
            want = gather_grids(raw, name, owner, rows, view)
            assert cells[name].numpy().tobytes() == want.numpy().tobytes(), (mode, name)
        if mode == 'none':
            assert 'collision' not in cells
        else:
            masked = _labels(store, 'mask')
            want = gather_grids(masked, 'collision', owner, rows, view[:, None])[:, 0]
            assert torch.equal(cells['collision'], want), mode
            assert cells['collision'].any() and not cells['collision'].all()


@pytest.mark.parametrize('mode', ['zero_scores', 'none'])
def test_summaries_reindexed_like_the_grids(store, mode):
    """Read per request at (K, V) views: each entry is the summary of that row and view."""
    labels = _labels(store, mode)
    V = store.grid[0]
    owner, rows, views = _requests(labels, V, seed=1)
    got = gather_view_summaries(labels, list(view_summaries.SUMMARY_DTYPES), owner, rows,
                                views, first_cell_widths=True)
    scores = gather_grids(labels, 'scores', owner, rows, views)  # collisions applied
    widths = gather_grids(labels, 'widths', owner, rows, views)
    for k in range(0, len(owner), 37):
        for w in range(V):
            want = _brute_force(scores[k, w].numpy(), widths[k, w].numpy())
            for name, value in want.items():
                assert np.float32(got[name][k, w]) == np.float32(value), (mode, name, k, w)
        assert got['first_cell_width'][k] == widths[k, 0, 0, 0]
    assert isinstance(got['value_tables'], np.ndarray) and got['value_tables'].size % 256 == 0


def test_matched_cells_need_codes_of_every_record(store):
    labels = _labels(store, 'zero_scores')
    assert reads_matched_cells(labels)
    record = labels[0].deferred
    object.__setattr__(record, 'matched_cells', False)
    assert not reads_matched_cells(labels)
    dense = [ObjectGraspLabels(points=o.points, pose=o.pose, object_id=o.object_id,
                               scores=torch.zeros(len(o.points), *store.grid)) for o in labels]
    assert not reads_matched_cells(dense)


def test_local_matched_reads_go_through_read_rows(store, monkeypatch):
    """Each stage's arrays are one read_rows_many call that copies every local array through
    ``read_common.read_rows`` (looked up at call time, so benchmarks and tests can wrap
    it), one call per array, with the same bits as the unwrapped reader."""
    from mmgrasp.storage.readers import common as read_common
    labels = _labels(store, 'zero_scores')
    owner, rows, views = _requests(labels, store.grid[0], n=50, seed=3)
    cells = ['scores', 'widths', 'tolerance', 'collision']
    names = list(view_summaries.SUMMARY_DTYPES)
    want = (gather_view_summaries(labels, names, owner, rows, views, first_cell_widths=True),
            gather_view_cells(labels, cells, owner, rows, views[:, 0]))
    seen, original = [], read_common.read_rows
    monkeypatch.setattr(read_common, 'read_rows',
                        lambda paths, *rest: seen.append(paths[0]) or original(paths, *rest))
    got = gather_view_summaries(labels, names, owner, rows, views, first_cell_widths=True)
    assert sorted(p.rsplit('/', 1)[1] for p in seen) == sorted(
        [f'{n}.npy' for n in names] + ['widths.npy'])
    seen.clear()
    got = (got, gather_view_cells(labels, cells, owner, rows, views[:, 0]))
    assert sorted(p.rsplit('/', 1)[1] for p in seen) == [
        'collision.npy', 'score_codes.npy', 'tolerance.npy', 'widths.npy']
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        assert all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)
