"""A label store published by URL gives the local store's deferred gathers bit for bit (every grid
name and collision mode, on the test HTTP server), and loader workers never touch the network."""
import itertools

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from mmgrasp.datasets import GraspNetDataset, GraspNetReader
from mmgrasp.datasets.transforms.grasp_labels import SampleGraspLabels
from mmgrasp.storage import open_remote_store, publish_store
from mmgrasp.storage.remote import store as remote_store
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.store import (LabelStoreError, build_label_store,
                                         open_remote_label_store)
from servers.range_server import RangeServer
from mmgrasp.structures import gather_grids
from mmgrasp.storage.readers.cells import CELL_NAMES
from mmgrasp.storage.labels.summaries import SUMMARY_DTYPES
from mmgrasp.structures.grasp_labels import (ObjectGraspLabels, gather_view_cells,
                                             gather_view_summaries, reads_matched_cells)

MODES = ('zero_scores', 'mask', 'none')
NAMES = ('scores', 'widths', 'collision', 'tolerance')


@pytest.fixture
def published(synthetic_root, tmp_path):
    """(local store, server of its published copy)."""
    remote_store._opened.clear()
    local = build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))
    publish_store(local.path, f'file://{tmp_path}/published')
    with RangeServer(str(tmp_path / 'published')) as server:
        yield local, server
    remote_store._opened.clear()


@pytest.fixture(params=['file', 'http', 's3'])
def published_url(request, synthetic_root, tmp_path):
    """(local store, URL of its published copy, the server in front or None) over each
    scheme in turn."""
    remote_store._opened.clear()
    local = build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))
    if request.param == 's3':
        server = request.getfixturevalue('s3_server')
        publish_store(local.path, server.url('published'))
        yield local, server.url('published'), server
    else:
        publish_store(local.path, f'file://{tmp_path}/published')
        if request.param == 'file':
            yield local, f'file://{tmp_path}/published', None
        else:
            with RangeServer(str(tmp_path / 'published')) as server:
                yield local, server.url, server
    remote_store._opened.clear()


def labels_of(store, mode):
    labels = []
    for scene, entry in sorted(store.scenes.items()):
        for instance, obj in enumerate(entry.object_ids):
            rows = np.arange(store.objects[obj].num_points, dtype=np.int32)[::2]
            record = StoreGrids(store=store.path, object_id=obj, rows=rows, grid=store.grid,
                                collision_mode=mode, has_tolerance=True, scene=scene,
                                collision_offset=entry.row_offsets[instance],
                                matched_cells=store.objects[obj].score_codes)
            labels.append(ObjectGraspLabels(points=torch.from_numpy(store.points(obj)[rows]),
                                            pose=torch.eye(4)[:3], object_id=obj,
                                            collision_mode=mode, deferred=record))
    return labels


def same_bits(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):  # host arrays (value tables)
        a, b = torch.from_numpy(a), torch.from_numpy(b)
    if a.dtype == torch.float32:
        a, b = a.view(torch.int32), b.view(torch.int32)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_remote_gathers_equal_local_for_every_name_and_mode(published_url, tmp_path):
    local, url, server = published_url
    remote = open_remote_label_store(url, str(tmp_path / 'remote-cache'),
                                     dict(block_size=512, gap=0))
    assert remote.path.startswith(url) and remote.grid == local.grid
    V = local.grid[0]
    for mode in MODES:
        near, far = labels_of(local, mode), labels_of(remote, mode)
        counts = torch.tensor([len(label.points) for label in near])
        g = torch.Generator().manual_seed(MODES.index(mode))
        owner = torch.randint(len(near), (200,), generator=g)
        rows = (torch.rand(200, generator=g) * counts[owner]).long()
        for name, views in itertools.product(NAMES, (None, 'one', 'several')):
            chosen = (None if views is None else torch.randint(V, (200,), generator=g)
                      if views == 'one' else torch.randint(V, (200, 3), generator=g))
            expected = gather_grids(near, name, owner, rows, chosen)
            got = gather_grids(far, name, owner, rows, chosen)
            assert same_bits(got, expected), (mode, name, views)
            assert (got is None) == (name == 'collision' and mode != 'mask')
    store = remote_store.opened_store_for(remote.path + '/manifest.json')
    assert store.pop_stats().requests > 0
    if server is not None:
        assert server.requests('scores.npy') and server.requests('collision.npy')
        server.clear_log()
    # warm: the same gathers again come from the block cache alone
    near, far = labels_of(local, 'mask'), labels_of(remote, 'mask')
    owner, rows = torch.zeros(50, dtype=torch.long), torch.arange(50) % len(near[0].points)
    for name in NAMES:
        assert same_bits(gather_grids(far, name, owner, rows),
                         gather_grids(near, name, owner, rows))
    assert store.pop_stats().requests == 0
    if server is not None:
        assert server.requests('.npy') == []


def test_remote_matched_cell_reads_equal_local(published_url, tmp_path):
    """The label-matching reads (per-view summaries, chosen-view cells with their value tables)
    from the published store give the local store's bits, in every collision mode; a cold read
    is one GET per coalesced range, never a HEAD."""
    local, url, server = published_url
    remote = open_remote_label_store(url, str(tmp_path / 'remote-cache'),
                                     dict(block_size=512, gap=0))
    store = remote_store.opened_store_for(remote.path + '/manifest.json')
    store.pop_stats()
    if server is not None:
        server.clear_log()
    V = local.grid[0]
    for mode in MODES:
        near, far = labels_of(local, mode), labels_of(remote, mode)
        assert reads_matched_cells(near) and reads_matched_cells(far)
        counts = torch.tensor([len(label.points) for label in near])
        g = torch.Generator().manual_seed(10 + MODES.index(mode))
        owner = torch.randint(len(near), (200,), generator=g)
        rows = (torch.rand(200, generator=g) * counts[owner]).long()
        views = torch.randint(V, (200, V), generator=g)
        names = list(SUMMARY_DTYPES)
        want = gather_view_summaries(near, names, owner, rows, views, first_cell_widths=True)
        got = gather_view_summaries(far, names, owner, rows, views, first_cell_widths=True)
        assert want.keys() == got.keys() and all(same_bits(got[k], want[k]) for k in want), mode
        cells = ['scores', 'widths', 'tolerance'] + (['collision'] if mode != 'none' else [])
        chosen = views[:, 0]
        want = gather_view_cells(near, cells, owner, rows, chosen)
        got = gather_view_cells(far, cells, owner, rows, chosen)
        assert want.keys() == got.keys() and all(same_bits(got[k], want[k]) for k in want), mode
    if server is not None:
        logged = server.requests('.npy')
        assert server.requests('score_codes.npy')
        assert len(logged) == store.pop_stats().requests  # one GET per range
        assert {entry.method for entry in logged} == {'GET'}


def test_each_matched_read_stage_is_one_wave(published, tmp_path):
    """Stage one (every per-view summary and the first-cell widths) and stage two (μ codes,
    widths, tolerance levels, collision bytes) of a cold remote store: each one read whose
    range requests of all its arrays are in flight together — one round trip, not one per
    array — with the local store's bits."""
    local, server = published
    remote = open_remote_label_store(server.url, str(tmp_path / 'remote-cache'),
                                     dict(block_size=512, gap=1 << 20))
    store = remote_store.opened_store_for(remote.path + '/manifest.json')
    near, far = labels_of(local, 'zero_scores'), labels_of(remote, 'zero_scores')
    V = local.grid[0]
    counts = torch.tensor([len(label.points) for label in near])
    g = torch.Generator().manual_seed(7)
    owner = torch.randint(len(near), (60,), generator=g)
    rows = (torch.rand(60, generator=g) * counts[owner]).long()
    views = torch.randint(V, (60, V), generator=g)
    names = list(SUMMARY_DTYPES)
    stages = {
        'one': (lambda labels: gather_view_summaries(labels, names, owner, rows, views,
                                                     first_cell_widths=True),
                {f'{n}.npy' for n in names} | {'widths.npy'}),
        'two': (lambda labels: gather_view_cells(labels, list(CELL_NAMES), owner, rows,
                                                 views[:, 0]),
                {'score_codes.npy', 'widths.npy', 'tolerance.npy', 'collision.npy'})}
    server.state.latency = 0.5
    store.pop_stats()
    for stage, (gather, files) in stages.items():
        server.clear_log()
        got = gather(far)
        stats, logged = store.pop_stats(), server.requests('.npy')
        assert {entry.path.rsplit('/', 1)[1] for entry in logged} == files, stage
        assert stats.read_calls == stats.waves == 1 and stats.requests == len(logged), stage
        assert server.state.max_in_flight == len(logged), stage  # none waited for another
        want = gather(near)
        assert want.keys() == got.keys() and all(same_bits(got[k], want[k]) for k in want)


def test_loader_workers_never_touch_the_network(published, synthetic_root, tmp_path):
    local, server = published

    def dataset(**options):
        return GraspNetDataset(synthetic_root, seed=3, pipeline=[
            dict(type='LoadGraspScene', num_points=800),
            dict(type='SampleGraspLabels', grids='deferred', min_points=10,
                 min_object_points=20, collision='mask', tolerance=True,
                 cache_dir=str(tmp_path / 'cache'), **options),
            dict(type='PackGraspInputs')])

    remote = dataset(store_url=server.url, remote=dict(block_size=512))  # opens in this process
    reference = dataset()
    server.clear_log()
    loader = DataLoader(remote, batch_size=2, num_workers=2, collate_fn=lambda batch: batch)
    samples = [s for batch in loader for s in batch]
    assert server.requests() == []  # the workers read the manifest and points from the mirror
    assert len(samples) == len(reference)
    for sample, index in zip(samples, range(len(reference))):
        want = reference[index]['data_samples'].grasp_labels
        got = sample['data_samples'].grasp_labels
        assert [g.object_id for g in got] == [w.object_id for w in want]
        for g, w in zip(got, want):
            assert g.deferred.store.startswith(server.url)
            assert np.array_equal(g.deferred.rows, w.deferred.rows)
            assert torch.equal(g.points, w.points)
            owner = torch.zeros(len(g.points), dtype=torch.long)
            rows = torch.arange(len(g.points))
            assert same_bits(gather_grids([g], 'scores', owner, rows),
                             gather_grids([w], 'scores', owner, rows))


def test_a_spawned_worker_opens_the_mirror_without_a_request(published, tmp_path):
    _, server = published
    cache = str(tmp_path / 'remote-cache')
    online = open_remote_store(server.url, cache)
    remote_store._opened.clear()  # as in a freshly spawned process
    server.clear_log()
    offline = open_remote_store(server.url, cache, offline=True)
    assert offline.url == online.url and offline.manifest == online.manifest
    assert server.requests() == []
    out = np.empty((1, 1), np.uint8)
    with pytest.raises(Exception, match='never touches the network'):
        offline.read_rows([f'{offline.url}/scenes/0000/collision.npy'], np.zeros(1, np.int64),
                          np.zeros(1, np.int64), (1,), out)
    with pytest.raises(Exception, match='open the store in the training process'):
        open_remote_store(server.url, str(tmp_path / 'elsewhere'), offline=True)


def test_dense_grids_from_a_url_are_refused():
    with pytest.raises(ValueError, match='deferred grids only'):
        SampleGraspLabels(grids='dense', store_url='http://127.0.0.1:9/store')


def test_a_store_of_another_format_is_refused(published, tmp_path):
    import json
    import os
    local, server = published
    version = os.path.join(str(tmp_path / 'published'), os.path.basename(local.path))
    with open(os.path.join(version, 'manifest.json')) as f:
        manifest = json.load(f)
    manifest['format_version'] = 999
    with open(os.path.join(version, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)
    with pytest.raises(LabelStoreError, match='format version 999'):
        open_remote_label_store(server.url, str(tmp_path / 'remote-cache'))


def test_storage_options_from_the_config_reach_the_client(synthetic_root, tmp_path, s3_server,
                                                          monkeypatch):
    """``SampleGraspLabels(remote=dict(storage_options=...))``: the endpoint given there (the
    environment names none) is where the store is read from."""
    remote_store._opened.clear()
    local = build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))
    options = dict(endpoint=s3_server.endpoint)
    monkeypatch.delenv('AWS_ENDPOINT_URL')
    monkeypatch.delenv('AWS_ENDPOINT')
    publish_store(local.path, s3_server.url('labels'), storage_options=options)
    s3_server.clear_log()
    transform = SampleGraspLabels(store_url=s3_server.url('labels'),
                                  cache_dir=str(tmp_path / 'remote-cache'),
                                  remote=dict(block_size=512, storage_options=options))
    store = transform.prepare(synthetic_root)
    assert store.path.startswith(s3_server.url('labels')) and store.grid == local.grid
    assert s3_server.requests('manifest.json')
    remote_store._opened.clear()
