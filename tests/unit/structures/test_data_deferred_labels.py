"""The deferred reader returns exactly the stored values; broken readers are caught.

Every check compares :func:`gather_grids` on deferred labels with the arrays the store was
built from (the npz/npy files, read through the reader). ``test_mutations_are_caught`` runs
the same checks against deliberately broken readers and requires each to fail them.
"""
import numpy as np
import pytest
import torch

import mmgrasp.storage.readers.common as read_common
import mmgrasp.storage.readers.rows as read_rows
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.structures.grasp_labels import ObjectGraspLabels, gather_grids

MODES = ('zero_scores', 'mask', 'none')


class Frame:
    """Deferred labels of every object of scenes 0 and 1 (scene 0 holds one model twice) and
    the expected grids computed from the source files."""

    def __init__(self, root: str, mode: str, tolerance: bool):
        reader = GraspNetReader(root)
        store = open_label_store(reader)
        rng = np.random.default_rng(7)
        self.objects, self.expected = [], []
        for scene in (0, 1):
            meta = reader.load_meta(scene, 0)
            collisions = reader.load_collision(scene)
            for instance, obj in enumerate(meta.object_ids.tolist()):
                label = reader.load_grasp_label(obj)
                n = len(label['points'])
                # record rows in any order, not only sorted: the reader must not rely on it
                rows = rng.choice(n, size=n // 2, replace=False).astype(np.int32)
                record = StoreGrids(store.path, obj, rows, store.grid, mode, tolerance, scene,
                                    store.collision_row_offset(scene, instance))
                self.objects.append(ObjectGraspLabels(
                    points=torch.from_numpy(label['points'][rows]), pose=torch.eye(3, 4),
                    object_id=obj, collision_mode=mode, deferred=record))
                collided = collisions[instance][rows]
                scores = label['scores'][rows].copy()
                expected = dict(scores=scores, widths=label['widths'][rows])
                if tolerance:
                    expected['tolerance'] = reader.load_tolerance(obj)[rows].copy()
                if mode == 'zero_scores':
                    scores[collided] = 0
                    if tolerance:
                        expected['tolerance'][collided] = 0
                expected['collision'] = collided if mode == 'mask' else None
                self.expected.append(expected)
        assert sum(o.object_id == 0 for o in self.objects[:4]) == 2  # duplicated model

    def requests(self, seed: int, count: int):
        """Unsorted requests over every object, with repeats."""
        rng = np.random.default_rng(seed)
        owner = rng.integers(0, len(self.objects), count)
        rows = np.array([rng.integers(0, self.objects[o].num_points) for o in owner])
        owner = np.concatenate([owner, owner[:5]])  # repeated requests
        rows = np.concatenate([rows, rows[:5]])
        views = rng.integers(0, 5, len(owner))
        slots = rng.integers(0, 5, (len(owner), 7))  # several views per request, repeated
        return owner, rows, views, slots

    def expect(self, name, owner, rows, views=None):
        if self.expected[0][name] is None:
            return None
        out = np.stack([self.expected[o][name][r] for o, r in zip(owner, rows)])
        if views is None:
            return out
        if views.ndim == 1:
            return out[np.arange(len(views)), views]
        return out[np.arange(len(views))[:, None], views]


def check_values(root, mode, tolerance):
    frame = Frame(root, mode, tolerance)
    names = ('scores', 'widths', 'collision') + (('tolerance',) if tolerance else ())
    for seed, count in ((0, 3), (1, 40), (2, 200)):  # reads of growing size reuse the buffer
        owner, rows, views, slots = frame.requests(seed, count)
        for name in names:
            for v in (None, views, slots):
                got = gather_grids(frame.objects, name, torch.from_numpy(owner),
                                   torch.from_numpy(rows), None if v is None else torch.from_numpy(v))
                want = frame.expect(name, owner, rows, v)
                if want is None:
                    assert got is None, name
                    continue
                assert got.shape == want.shape, (name, None if v is None else v.shape)
                assert got.numpy().tobytes() == want.tobytes(), (name, mode, v is None)


def check_empty_request(root, mode):
    frame = Frame(root, mode, True)
    empty = torch.zeros(0, dtype=torch.long)
    assert gather_grids(frame.objects, 'scores', empty, empty).shape == (0, 5, 3, 3)
    assert gather_grids(frame.objects, 'widths', empty, empty, empty).shape == (0, 3, 3)
    slots = torch.zeros((0, 4), dtype=torch.long)
    assert gather_grids(frame.objects, 'scores', empty, empty, slots).shape == (0, 4, 3, 3)


def check_dense_equals_sources(root, mode):
    frame = Frame(root, mode, True)
    for obj, expected in zip(frame.objects, frame.expected):
        dense = obj.dense()
        assert not dense.is_deferred
        for name in ('scores', 'widths', 'tolerance', 'collision'):
            got = getattr(dense, name)
            if expected[name] is None:
                assert got is None
            else:
                assert got.numpy().tobytes() == expected[name].tobytes(), name


def run_all_checks(root):
    for mode in MODES:
        for tolerance in (False, True):
            check_values(root, mode, tolerance)
        check_empty_request(root, mode)
        check_dense_equals_sources(root, mode)


def test_deferred_reader_returns_stored_values(synthetic_root):
    run_all_checks(synthetic_root)


def test_deferred_scores_is_none_and_fails_loudly(synthetic_root):
    frame = Frame(synthetic_root, 'zero_scores', False)
    assert frame.objects[0].scores is None
    with pytest.raises(TypeError):
        frame.objects[0].scores[0]


def test_bad_requests_are_named(synthetic_root):
    frame = Frame(synthetic_root, 'zero_scores', False)
    n = frame.objects[1].num_points
    with pytest.raises(IndexError, match=f'reads row {n} of object 1, which has {n}'):
        gather_grids(frame.objects, 'scores', torch.tensor([1]), torch.tensor([n]))
    with pytest.raises(KeyError, match="'tolerance' requested but the labels carry none"):
        gather_grids(frame.objects, 'tolerance', torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(KeyError, match="grid name 'offsets'"):
        gather_grids(frame.objects, 'offsets', torch.tensor([1]), torch.tensor([0]))


# ------------------------------------------------------------------------------ mutation check
def _wrap(module, name, change):
    """Replace ``module.name`` (where the reader looks it up) by ``change(original, ...)``."""
    original = getattr(module, name)
    return module, name, lambda *args, **kwargs: change(original, *args, **kwargs)


class _BufferWithoutResizing(read_common.ReadBuffer):
    """A buffer that keeps its first (small) allocation for every read, CPU reads included."""

    def acquire(self, nbytes):
        if self._storage is None:
            self._storage = torch.empty(max(nbytes, 64), dtype=torch.uint8)
            self._array = self._storage.numpy()
        return self._storage[:nbytes], self._array[:nbytes]

    def to_device(self, host, device):
        return host


MUTATIONS = {
    'wrong bit order': (read_common, 'COLLISION_BITORDER', 'big'),
    'off-by-one value row': _wrap(read_rows, 'request_file_rows', lambda f, r, o, rows: np.minimum(
        f(r, o, rows) + 1, min(x.rows.max() for x in r))),
    'off-by-one collision row offset': _wrap(read_rows, 'collision_rows', lambda f, *a: f(*a) + 1),
    'forgotten zeroing': _wrap(read_rows, 'assemble', lambda f, data, name, *a: f(
        data if name == 'collision' else {k: v for k, v in data.items()
                                          if not k.startswith('collision')}, name, *a)),
    'views ignored': _wrap(read_rows, 'value_keys', lambda f, rows, views, v: f(rows, None, v) * v),
    'several views per request ignored': _wrap(read_rows, 'expand', lambda f, rows, index, views: f(
        rows, index, None if views is None else torch.zeros_like(views))),
    'widths at the wrong view': _wrap(read_rows, 'value_keys', lambda f, rows, views, v: f(
        rows, None if views is None else (views + 1) % v, v)),
    'rows not expanded in request order': _wrap(
        read_common, 'distinct_in_file_order', lambda f, *a: (*f(*a)[:2], np.sort(f(*a)[2]))),
    'buffer reused without resizing': (read_common, 'ReadBuffer', _BufferWithoutResizing),
    'collision rows of other requests': _wrap(
        read_rows, 'unpack_bits', lambda f, packed, cells: f(packed.flip(0), cells)),
    'tolerance levels looked up in the first object radii': _wrap(
        read_rows, 'assemble', lambda f, data, name, *a: f(
            {**data, 'radius_start': torch.zeros_like(data['radius_start'])}
            if 'radius_start' in data else data, name, *a)),
}


@pytest.mark.parametrize('mutation', sorted(MUTATIONS))
def test_mutations_are_caught(synthetic_root, monkeypatch, mutation):
    module, name, value = MUTATIONS[mutation]
    monkeypatch.setattr(module, name, value)
    if name == 'ReadBuffer':  # a fresh pool: no buffer sized by an earlier test
        monkeypatch.setattr(read_common, '_buffers', read_common.BufferPool())
    with pytest.raises((AssertionError, ValueError, IndexError, RuntimeError)):
        run_all_checks(synthetic_root)


def test_torch_unpacking_matches_numpy():
    """The accelerator path of unpack_bits, run on the CPU against numpy's."""
    packed = torch.randint(0, 256, (9, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(read_common.unpack_bits_torch(packed, 45),
                       read_common.unpack_bits(packed, 45))
