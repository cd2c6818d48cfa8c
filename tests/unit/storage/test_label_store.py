"""The label store: values bit for bit, bit order, staleness, atomic and concurrent builds."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.derived_assets import current_version
from mmgrasp.storage.labels.store import (LabelStoreError, build_label_store, open_label_store,
                                          pack_rows, store_path_for, unpack_rows)


@pytest.fixture
def dataset_copy(synthetic_root, tmp_path) -> str:
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    return root


def test_store_equals_sources_bit_for_bit(synthetic_root, tmp_path):
    store = build_label_store(GraspNetReader(synthetic_root), str(tmp_path))
    reader = GraspNetReader(synthetic_root)
    assert store.grid == (5, 3, 3)
    for obj, entry in store.objects.items():
        label = reader.load_grasp_label(obj)
        np.testing.assert_array_equal(store.points(obj), label['points'])
        for name in ('scores', 'widths'):
            stored = np.load(store.object_file(obj, name))
            assert stored.dtype == np.float32
            assert stored.tobytes() == label[name].tobytes(), (obj, name)
        packed = np.load(store.object_file(obj, 'self_collision'))
        np.testing.assert_array_equal(unpack_rows(packed, store.grid), label['self_collision'])
        tolerance = reader.load_tolerance(obj)
        levels = np.load(store.object_file(obj, 'tolerance'))
        assert levels.dtype == np.uint8 and entry.has_tolerance
        assert store.tolerance_radii(obj)[levels].tobytes() == tolerance.tobytes()
    for scene, entry in store.scenes.items():
        masks = reader.load_collision(scene)
        rows = np.load(store.collision_file(scene))
        assert entry.object_ids == tuple(reader.load_meta(scene, 0).object_ids)
        for instance, mask in enumerate(masks):
            start = store.collision_row_offset(scene, instance)
            np.testing.assert_array_equal(unpack_rows(rows[start:start + len(mask)], store.grid),
                                          mask)


def test_bit_order_is_little_and_round_trips_off_multiple_of_8():
    grid = (5, 3, 3)  # 45 cells: the last byte holds 5 bits
    mask = np.zeros((2, *grid), bool)
    mask[0].reshape(-1)[10] = True  # byte 1, bit 2 counted from the least significant bit
    mask[1].reshape(-1)[44] = True  # byte 5, bit 4
    packed = pack_rows(mask)
    assert packed.shape == (2, 6)
    assert packed[0].tolist() == [0, 4, 0, 0, 0, 0]
    assert packed[1].tolist() == [0, 0, 0, 0, 0, 16]
    rng = np.random.default_rng(0)
    random = rng.random((7, *grid)) < 0.3
    np.testing.assert_array_equal(unpack_rows(pack_rows(random), grid), random)


def test_open_without_store_refuses_with_rebuild_hint(synthetic_root, tmp_path):
    with pytest.raises(LabelStoreError, match='it does not exist.*build_label_store.py'):
        open_label_store(GraspNetReader(synthetic_root), str(tmp_path), build=False)


def test_stale_store_is_refused_or_rebuilt(dataset_copy, tmp_path):
    cache = str(tmp_path / 'cache')
    store = build_label_store(GraspNetReader(dataset_copy), cache)
    reader = GraspNetReader(dataset_copy)
    obj = min(store.objects)
    path = reader.grasp_label_path(obj)
    with np.load(path) as npz:
        arrays = dict(npz)
    arrays['scores'] = np.where(arrays['scores'] > 0, np.float32(0.5), arrays['scores'])
    np.savez(path, **arrays)
    with pytest.raises(LabelStoreError, match=f'source {path} changed'):
        open_label_store(GraspNetReader(dataset_copy), cache, build=False)
    rebuilt = open_label_store(GraspNetReader(dataset_copy), cache)
    np.testing.assert_array_equal(np.load(rebuilt.object_file(obj, 'scores')), arrays['scores'])
    reopened = open_label_store(GraspNetReader(dataset_copy), cache, build=False)
    assert reopened.path == rebuilt.path != store.path
    assert os.path.isfile(store.object_file(obj, 'scores'))  # still held by `store`: kept
    os.remove(reader.tolerance_path(obj))
    with pytest.raises(LabelStoreError, match='no longer exists'):
        open_label_store(GraspNetReader(dataset_copy), cache, build=False)


def test_foreign_and_old_format_store_is_refused(dataset_copy, tmp_path):
    cache = str(tmp_path / 'cache')
    store = build_label_store(GraspNetReader(dataset_copy), cache)
    manifest_path = os.path.join(store.path, 'manifest.json')
    with open(manifest_path) as f:
        manifest = json.load(f)
    with open(manifest_path, 'w') as f:
        json.dump(dict(manifest, root='/elsewhere/graspnet'), f)
    with pytest.raises(LabelStoreError, match='built from /elsewhere/graspnet'):
        open_label_store(GraspNetReader(dataset_copy), cache, build=False)
    with open(manifest_path, 'w') as f:
        json.dump(dict(manifest, format_version=0), f)
    with pytest.raises(LabelStoreError, match='format version 0'):
        open_label_store(GraspNetReader(dataset_copy), cache, build=False)


def test_unwritable_cache_is_named(synthetic_root, tmp_path):
    blocker = tmp_path / 'not_a_dir'
    blocker.write_text('a file where the cache folder should be')
    with pytest.raises(LabelStoreError, match='cannot write the label store under .*not_a_dir.*'
                                              'MMGRASP_CACHE'):
        build_label_store(GraspNetReader(synthetic_root), str(blocker / 'cache'))


_SLOW_BUILD = textwrap.dedent('''
    import sys, time
    import mmgrasp.storage.labels.store as ls
    from mmgrasp.datasets.graspnet_reader import GraspNetReader
    save = ls._save
    def slow_save(path, array):
        save(path, array)
        time.sleep(float(sys.argv[3]))
    ls._save = slow_save
    ls.build_label_store(GraspNetReader(sys.argv[1]), sys.argv[2])
''')


def _start_builder(root, cache, delay):
    return subprocess.Popen([sys.executable, '-c', _SLOW_BUILD, root, cache, str(delay)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_killed_build_leaves_no_usable_store(synthetic_root, tmp_path):
    cache = str(tmp_path / 'cache')
    store = store_path_for(synthetic_root, cache)
    proc = _start_builder(synthetic_root, cache, 0.2)
    deadline = time.time() + 60
    while not glob.glob(os.path.join(store, 'tmp-*', 'objects', '*', '*.npy')):
        assert time.time() < deadline and proc.poll() is None, proc.stdout.read()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert current_version(store) is None
    assert glob.glob(os.path.join(store, 'tmp-*'))
    with pytest.raises(LabelStoreError, match='does not exist'):
        open_label_store(GraspNetReader(synthetic_root), cache, build=False)
    built = build_label_store(GraspNetReader(synthetic_root), cache)
    assert not glob.glob(os.path.join(store, 'tmp-*'))
    assert open_label_store(GraspNetReader(synthetic_root), cache, build=False).path == built.path
    assert os.path.dirname(built.path) == store


@pytest.mark.slow
def test_concurrent_builders_share_one_store(synthetic_root, tmp_path):
    cache = str(tmp_path / 'cache')
    builders = [_start_builder(synthetic_root, cache, 0.01) for _ in range(2)]
    outputs = [b.communicate(timeout=120)[0].decode() for b in builders]
    assert [b.returncode for b in builders] == [0, 0], outputs
    assert sum('label store: built' in o for o in outputs) == 1, outputs
    store = open_label_store(GraspNetReader(synthetic_root), cache, build=False)
    name = os.path.basename(store_path_for(synthetic_root, cache))
    assert sorted(os.listdir(cache)) == [name, name + '.lock']
    assert sorted(os.listdir(os.path.join(cache, name))) == [
        'CURRENT', os.path.basename(store.path)]


def _write_tolerance(folder, reader, objects, scale):
    os.makedirs(folder, exist_ok=True)
    for obj in objects:
        np.save(os.path.join(folder, f'{obj:03d}_tolerance.npy'),
                (reader.load_tolerance(obj) * scale).astype(np.float32))


def test_store_is_keyed_by_its_tolerance_folder(synthetic_root, tmp_path):
    """A store built from one tolerance folder is never served for another, and a tolerance
    file that changes (or appears) makes the store stale."""
    cache = str(tmp_path / 'cache')
    reader = GraspNetReader(synthetic_root)
    default = open_label_store(GraspNetReader(synthetic_root), cache)
    other = str(tmp_path / 'other_tolerance')
    _write_tolerance(other, reader, default.objects, 2)
    served = open_label_store(GraspNetReader(synthetic_root, tolerance_dir=other), cache)
    for obj in default.objects:
        levels = np.load(served.object_file(obj, 'tolerance'))
        np.testing.assert_array_equal(served.tolerance_radii(obj)[levels],
                                      reader.load_tolerance(obj) * 2)
    assert open_label_store(GraspNetReader(synthetic_root), cache, build=False).path == default.path
    obj = min(default.objects)
    np.save(os.path.join(other, f'{obj:03d}_tolerance.npy'),
            (reader.load_tolerance(obj) * 3).astype(np.float32))
    with pytest.raises(LabelStoreError, match=f'{obj:03d}_tolerance.npy changed'):
        open_label_store(GraspNetReader(synthetic_root, tolerance_dir=other), cache, build=False)
    empty = str(tmp_path / 'no_tolerance')
    os.makedirs(empty)
    bare = open_label_store(GraspNetReader(synthetic_root, tolerance_dir=empty), cache)
    assert not any(entry.has_tolerance for entry in bare.objects.values())
    _write_tolerance(empty, reader, [obj], 1)
    with pytest.raises(LabelStoreError, match=f'{obj:03d}_tolerance.npy'):
        open_label_store(GraspNetReader(synthetic_root, tolerance_dir=empty), cache, build=False)
    bare_reader = GraspNetReader(synthetic_root, tolerance_dir=empty)
    assert open_label_store(bare_reader, cache).objects[obj].has_tolerance


_OLD_STORE_READER = textwrap.dedent('''
    import sys, time
    import numpy as np, torch
    from mmgrasp.datasets.graspnet_reader import GraspNetReader
    from mmgrasp.storage.readers import StoreGrids
    from mmgrasp.storage.labels.store import open_label_store
    from mmgrasp.structures.grasp_labels import ObjectGraspLabels
    from mmgrasp.structures import gather_grids
    root, cache, obj, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = open_label_store(GraspNetReader(root), cache, build=False)
    rows = np.arange(store.objects[obj].num_points, dtype=np.int32)
    scene = min(s for s, e in store.scenes.items() if obj in e.object_ids)
    record = StoreGrids(store=store.path, object_id=obj, rows=rows, grid=store.grid,
                        collision_mode='none', has_tolerance=False, scene=scene,
                        collision_offset=0)
    labels = [ObjectGraspLabels(points=torch.from_numpy(store.points(obj)), pose=torch.eye(4)[:3],
                                object_id=obj, collision_mode='none', deferred=record)]
    def read():
        return gather_grids(labels, 'scores', torch.zeros(len(rows), dtype=torch.long),
                            torch.arange(len(rows))).numpy()
    first = read()
    print('opened', store.path, flush=True)
    import os
    while not os.path.exists(go):
        time.sleep(0.02)
    assert read().tobytes() == first.tobytes()  # the maps of the old files are still valid
    from mmgrasp.storage.labels.maps import open_maps
    open_maps()._maps.clear()  # maps closed (ulimit) and reopened: the old files are still there
    assert read().tobytes() == first.tobytes(), 'the old store changed under a running job'
    print('old values kept', float(first.max()), flush=True)
''')


@pytest.mark.slow
def test_rebuild_never_pulls_a_store_from_under_a_running_job(dataset_copy, tmp_path):
    """Process 1 reads a store; a source changes; process 2 opens (and rebuilds) the store and
    reads the new values; process 1 keeps reading the old values, without LabelFileChanged."""
    cache = str(tmp_path / 'cache')
    old = build_label_store(GraspNetReader(dataset_copy), cache)
    obj = min(old.objects)
    go = str(tmp_path / 'go')
    first = subprocess.Popen([sys.executable, '-c', _OLD_STORE_READER, dataset_copy, cache,
                              str(obj), go], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    assert first.stdout.readline().startswith('opened'), first.communicate()[0]
    path = GraspNetReader(dataset_copy).grasp_label_path(obj)
    with np.load(path) as npz:
        arrays = dict(npz)
    arrays['scores'] = np.where(arrays['scores'] > 0, np.float32(0.5), arrays['scores'])
    np.savez(path, **arrays)
    second = subprocess.run([sys.executable, '-c', textwrap.dedent('''
        import sys, numpy as np
        from mmgrasp.datasets.graspnet_reader import GraspNetReader
        from mmgrasp.storage.labels.store import open_label_store
        store = open_label_store(GraspNetReader(sys.argv[1]), sys.argv[2])
        print(store.path, float(np.load(store.object_file(int(sys.argv[3]), 'scores')).max()))
        '''), dataset_copy, cache, str(obj)], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    new_path, new_max = second.stdout.split()[-2:]
    assert float(new_max) == 0.5
    open(go, 'w').close()
    out = first.communicate(timeout=120)[0]
    assert first.returncode == 0 and 'old values kept' in out, out
    assert float(out.split()[-1]) > 0.5 and new_path != old.path
    # the old version goes when nobody uses it any more: at the next build
    del old
    os.utime(path)
    rebuilt = open_label_store(GraspNetReader(dataset_copy), cache)
    folder = store_path_for(dataset_copy, cache)
    versions = [n for n in os.listdir(folder) if n.startswith('store-')]
    assert versions == [os.path.basename(rebuilt.path)], versions


def test_a_link_to_the_dataset_shares_its_store_and_the_build_says_size_and_place(
        dataset_copy, tmp_path):
    """Reached through a symbolic link, a dataset is the same dataset: one store, not a second
    full build; a build names where the store went and how big it is."""
    import logging

    from mmengine.logging import MMLogger
    link = str(tmp_path / 'linked_graspnet')
    os.symlink(dataset_copy, link)
    cache = str(tmp_path / 'cache')
    assert store_path_for(link, cache) == store_path_for(dataset_copy, cache)

    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        store = build_label_store(GraspNetReader(dataset_copy), cache)
        built = [m for m in messages if 'built' in m]
        assert len(built) == 1 and store.path in built[0], messages
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(store.path)
                   for f in fs)
        assert f'({size / 2 ** 20:.1f} MiB)' in built[0]
        messages.clear()
        through_link = open_label_store(GraspNetReader(link), cache, build=False)
    finally:
        logger.removeHandler(handler)
    assert through_link.path == store.path
    assert not any('building' in m or 'built' in m for m in messages), messages
    assert len([e for e in os.listdir(cache) if not e.endswith('.lock')]) == 1
