"""Label file maps: bounded by ulimit -n, read-ahead, fork safety, files changed under a run."""
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.labels import maps as label_maps
from mmgrasp.storage.labels.maps import LabelFileChanged, MapCache, open_map_limit
from mmgrasp.storage.labels.store import build_label_store


@pytest.fixture
def store(synthetic_root, tmp_path):
    return build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))


def test_limit_follows_ulimit():
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert open_map_limit() == min(4096, soft // 2)


_LOWERED_LIMIT = textwrap.dedent('''
    import os, resource, sys
    import numpy as np, torch
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), hard))
    from mmgrasp.datasets.graspnet_reader import GraspNetReader
    from mmgrasp.storage.labels.maps import open_maps, open_map_limit
    from mmgrasp.storage.labels.store import open_label_store
    store = open_label_store(GraspNetReader(sys.argv[1]), build=False)
    files = [store.object_file(o, n) for o in store.objects
             for n in ('scores', 'widths', 'tolerance', 'self_collision', 'points')]
    files += [store.collision_file(s) for s in store.scenes]
    assert len(files) > open_map_limit(), (len(files), open_map_limit())
    maps = open_maps()
    for rounds in range(3):
        for path in files:
            assert np.array_equal(maps.get(path), np.load(path)), path
            assert len(maps) <= open_map_limit()
    print('maps', len(maps), 'limit', open_map_limit(), 'files', len(files))
''')


@pytest.mark.slow
def test_more_files_than_the_cap_under_lowered_ulimit(store, synthetic_root, tmp_path):
    env = dict(os.environ, MMGRASP_CACHE=str(tmp_path / 'cache'), MMGRASP_LABEL_READ_AHEAD='0')
    out = subprocess.run([sys.executable, '-c', _LOWERED_LIMIT, synthetic_root, '40'], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'maps 20 limit 20' in out.stdout


def test_read_ahead_reads_new_files_once(store):
    maps = MapCache(read_ahead=True)
    path = store.object_file(min(store.objects), 'scores')
    maps.get(path)
    maps.get(path)
    maps.read_ahead.wait()
    assert maps.read_ahead.active == 0
    assert maps._seen == {path}
    assert MapCache(read_ahead=False).read_ahead is None


def test_read_ahead_switch(monkeypatch):
    monkeypatch.setenv('MMGRASP_LABEL_READ_AHEAD', '0')
    assert MapCache().read_ahead is None
    monkeypatch.setenv('MMGRASP_LABEL_READ_AHEAD', '1')
    assert MapCache().read_ahead is not None


def test_forked_child_starts_without_maps_or_threads(store):
    maps = label_maps.open_maps()
    for obj in store.objects:
        maps.get(store.object_file(obj, 'scores'))
    assert len(label_maps.open_maps()) > 0
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report and leave without running pytest's teardown
        child = label_maps.open_maps()
        others = [t.name for t in threading.enumerate() if t.name == 'mmgrasp-read-ahead']
        os.write(write, f'{len(child)} {child is maps} {len(others)}'.encode())
        os._exit(0)
    os.close(write)
    report = os.read(read, 100).decode()
    os.waitpid(pid, 0)
    assert report == '0 False 0'
    assert len(label_maps.open_maps()) > 0  # the parent keeps its maps


def _copy_store(store, tmp_path):
    target = str(tmp_path / 'copy')
    shutil.copytree(store.path, target)
    return target


def test_file_deleted_while_mapped(store, tmp_path):
    folder = _copy_store(store, tmp_path)
    path = f'{folder}/objects/{min(store.objects):03d}/scores.npy'
    maps = MapCache(read_ahead=False)
    maps.get(path)
    os.remove(path)
    with pytest.raises(LabelFileChanged, match=f'{path} was deleted while in use'):
        maps.get(path)


def test_file_truncated_while_mapped(store, tmp_path):
    folder = _copy_store(store, tmp_path)
    path = f'{folder}/objects/{min(store.objects):03d}/widths.npy'
    maps = MapCache(read_ahead=False)
    maps.get(path)
    with open(path, 'r+b') as f:
        f.truncate(os.path.getsize(path) - 100)
    with pytest.raises(LabelFileChanged, match=f'{path} was replaced, modified or truncated'):
        maps.get(path)
    with pytest.raises(LabelFileChanged, match='cannot be mapped'):
        MapCache(read_ahead=False).get(path)


def test_file_replaced_while_mapped(store, tmp_path):
    folder = _copy_store(store, tmp_path)
    path = f'{folder}/objects/{min(store.objects):03d}/scores.npy'
    maps = MapCache(read_ahead=False)
    before = np.array(maps.get(path))
    replacement = path + '.new'
    with open(replacement, 'wb') as f:
        np.save(f, before + 1)
    os.rename(replacement, path)
    with pytest.raises(LabelFileChanged, match='replaced, modified or truncated'):
        maps.get(path)


def test_deferred_gather_reports_a_changed_store(make_dataset, tmp_path):
    from mmgrasp.structures import gather_grids
    sample = make_dataset('deferred')[(0, 0)]
    labels = sample['data_samples'].grasp_labels
    record = labels[0].deferred
    gather_grids(labels, 'scores', torch.tensor([0]), torch.tensor([0]))
    path = record.object_file('scores')
    original = path + '.orig'
    os.rename(path, original)
    try:
        shutil.copy(original, path)  # same bytes, another file: still refused
        with pytest.raises(LabelFileChanged, match='scores.npy'):
            gather_grids(labels, 'scores', torch.tensor([0]), torch.tensor([0]))
    finally:
        os.replace(original, path)
        label_maps._forget_parent_maps()
