"""The deferred reader and its map cache under a threaded forward (nn.DataParallel, pools)."""
import sys
import threading

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.maps import MapCache
from mmgrasp.storage.labels.store import build_label_store
from mmgrasp.structures import gather_grids
from mmgrasp.structures.grasp_labels import ObjectGraspLabels

THREADS, ROUNDS = 8, 40


@pytest.fixture
def store(synthetic_root, tmp_path):
    return build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))


@pytest.fixture
def fast_switching():
    """Switch threads as often as possible: a race shows itself in a few rounds."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def _labels(store, mode):
    labels = []
    for scene, entry in sorted(store.scenes.items()):
        for instance, obj in enumerate(entry.object_ids):
            rows = np.arange(store.objects[obj].num_points, dtype=np.int32)
            record = StoreGrids(store=store.path, object_id=obj, rows=rows, grid=store.grid,
                                collision_mode=mode, has_tolerance=True, scene=scene,
                                collision_offset=entry.row_offsets[instance])
            labels.append(ObjectGraspLabels(points=torch.from_numpy(store.points(obj)),
                                            pose=torch.eye(4)[:3], object_id=obj,
                                            collision_mode=mode, deferred=record))
    return labels


def _run_threads(work):
    errors = []

    def run(t):
        try:
            work(t)
        except BaseException as exc:  # reported in the main thread
            errors.append(f'thread {t}: {exc!r}')

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_threaded_gathers_read_their_own_rows(store, fast_switching):
    """Threads gathering different rows at once (one reused read buffer in the reader) each get
    the values a single thread reads."""
    labels = _labels(store, 'zero_scores')
    counts = torch.tensor([len(label.points) for label in labels])
    requests, expected = [], []
    for t in range(THREADS):
        g = torch.Generator().manual_seed(t)
        owner = torch.randint(len(labels), (300,), generator=g)
        rows = (torch.rand(300, generator=g) * counts[owner]).long()
        views = torch.randint(store.grid[0], (300,), generator=g)
        name = ('scores', 'widths', 'tolerance')[t % 3]
        requests.append((name, owner, rows, views if t % 2 else None))
        expected.append(gather_grids(labels, *requests[-1]).clone())

    def work(t):
        for _ in range(ROUNDS):
            got = gather_grids(labels, *requests[t])
            if not torch.equal(got, expected[t]):
                raise AssertionError(f'{requests[t][0]}: {int((got != expected[t]).sum())} '
                                     f'cells differ from a single-threaded read')

    errors = _run_threads(work)
    assert not errors, errors


def test_map_cache_is_shared_safely_by_threads(store, fast_switching):
    """Many threads through one small cache: every read maps the right file, the cache stays
    within its limit and nothing raises."""
    files = [store.object_file(obj, name) for obj in sorted(store.objects)
             for name in ('scores', 'widths', 'tolerance', 'points')]
    contents = {path: np.load(path) for path in files}
    maps = MapCache(limit=3, read_ahead=False)

    def work(t):
        for i in range(ROUNDS * 10):
            path = files[(t * 7 + i) % len(files)]
            if not np.array_equal(maps.get(path), contents[path]):
                raise AssertionError(f'{path}: wrong contents')
            if len(maps) > maps.limit:
                raise AssertionError(f'{len(maps)} maps open, limit {maps.limit}')

    errors = _run_threads(work)
    assert not errors, errors[:3]
