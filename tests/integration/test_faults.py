"""Faults and bad input at run time: each gets a clear error naming the file or key, or a
documented recovery — never a wrong value used silently, never a hidden worker crash.

Elsewhere: label files deleted/truncated/replaced under a run (tests/unit/storage/
test_label_maps.py), a store whose manifest no longer matches its sources (test_label_store.py),
a checkpoint of another config hash (tests/unit/engine/test_config_hash.py and the resume tests).
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from mmengine.dataset import pseudo_collate
from torch.utils.data import DataLoader

from mmgrasp.datasets import GraspNetDataset, GraspNetReader
from mmgrasp.registry import MODELS, TASK_UTILS, build_in_scope
from mmgrasp.storage.labels.store import build_label_store


def test_unknown_grids_value_names_the_key(synthetic_root):
    with pytest.raises(ValueError, match="SampleGraspLabels: grids='lazy' is not a storage"):
        GraspNetDataset(synthetic_root, pipeline=[dict(type='LoadGraspScene'),
                                                  dict(type='SampleGraspLabels', grids='lazy')])


@TASK_UTILS.register_module(force=True)
class IndexesScoresAssigner:
    """A user's assigner that reads labels.scores directly (works only with dense grids)."""

    def assign(self, seeds, labels):
        return labels.objects[0].scores[0]

    def match_view(self, matched, top_view, labels):
        return matched


def test_assigner_indexing_scores_under_deferred_is_explained(make_dataset):
    torch.manual_seed(0)
    model = build_in_scope(MODELS, dict(
        type='GSNet', num_seeds=16, num_views=5, num_angles=3, num_depths=3,
        backbone=dict(type='SparseUNet14', channels=(8,) * 8, out_channels=16),
        crop=dict(channels=(16,)), assigner=dict(type='IndexesScoresAssigner')))
    data = model.data_preprocessor(pseudo_collate([make_dataset('deferred')[0]]), True)
    with pytest.raises(TypeError, match=r"IndexesScoresAssigner indexed a grid .*grids='deferred'"
                                        r'.*gather_grids'):
        model(**data, mode='loss')


def test_worker_failure_names_the_file(synthetic_root, tmp_path):
    # The per-sample file reads of the reference path (the frame store's build, which fails in
    # the main process naming the file, is tested in tests/unit/storage/test_frame_store.py).
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    missing = os.path.join(root, 'scenes', 'scene_0001', 'realsense', 'depth', '0001.png')
    os.remove(missing)
    dataset = GraspNetDataset(root, pipeline=[dict(type='LoadGraspScene', num_points=500,
                                                   source='files'),
                                              dict(type='PackGraspInputs')])
    batches = iter(DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=pseudo_collate))
    with pytest.raises(Exception) as info:
        for _ in batches:
            pass
    text = str(info.value)
    del info, batches  # the workers stop now, not when the session ends
    assert missing in text and 'file not found' in text and 'scene 1 frame 1' in text


_READ_ONLY = textwrap.dedent('''
    import os, sys, torch
    from mmgrasp.datasets import GraspNetDataset, GraspNetReader
    from mmgrasp.storage.labels.store import LabelStoreError, open_label_store
    from mmgrasp.structures import gather_grids
    root, cache, changed = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        open(os.path.join(cache, 'probe'), 'w')
        raise SystemExit('cache is writable')
    except OSError:
        pass
    dataset = GraspNetDataset(root, pipeline=[
        dict(type='LoadGraspScene', num_points=500),
        dict(type='SampleGraspLabels', grids='deferred', min_points=10, min_object_points=20,
             cache_dir=cache),
        dict(type='PackGraspInputs')])
    labels = dataset[0]['data_samples'].grasp_labels
    print('read', tuple(gather_grids(labels, 'scores', torch.tensor([0]), torch.tensor([0])).shape))
    os.utime(changed, (1, 1))  # a source changes: the store is stale and cannot be rebuilt here
    try:
        open_label_store(GraspNetReader(root), cache)
    except LabelStoreError as exc:
        print('refused:', exc)
''')


@pytest.mark.slow
def test_store_on_a_read_only_file_system(synthetic_root, tmp_path):
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    cache = str(tmp_path / 'cache')
    build_label_store(GraspNetReader(root), cache)
    script = tmp_path / 'read_only.py'
    script.write_text(_READ_ONLY)
    changed = os.path.join(root, 'grasp_label', '000_labels.npz')
    mount = (f'mount --bind {cache} {cache} && mount -o remount,bind,ro {cache} && '
             f'{sys.executable} {script} {root} {cache} {changed}')
    out = subprocess.run(['unshare', '-m', 'sh', '-c', mount], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0 and ('mount' in out.stderr or 'unshare' in out.stderr) \
            and 'read (' not in out.stdout:
        pytest.skip(f'cannot mount read-only here: {out.stderr.strip()[-200:]}')
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'read (1, 5, 3, 3)' in out.stdout
    assert 'refused: cannot write the label store under' in out.stdout
    assert 'Read-only file system' in out.stdout and 'MMGRASP_CACHE' in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize('scheme', ['http', 's3'])
def test_a_training_whose_label_server_dies_stops_within_the_bound(scheme, synthetic_root,
                                                                   tmp_path, make_dataset,
                                                                   tiny_gsnet, request):
    """Training steps read the published store by URL; the server is killed after the first:
    the next step that needs a range stops the training with RemoteReadError naming the URL,
    within the timeout and retry budget."""

    from mmgrasp.storage import RemoteReadError, publish_store
    from mmgrasp.storage.remote import store as remote_store
    from mmgrasp.storage.remote.sources import read_bound
    from servers.range_server import RangeServer
    remote_store._opened.clear()
    request.addfinalizer(remote_store._opened.clear)
    local = build_label_store(GraspNetReader(synthetic_root), str(tmp_path / 'cache'))
    if scheme == 's3':
        server = request.getfixturevalue('s3_server')
        url = server.url('labels')
        publish_store(local.path, url)
    else:
        publish_store(local.path, f'file://{tmp_path}/published')
        server = RangeServer(str(tmp_path / 'published')).__enter__()
        request.addfinalizer(lambda: server.__exit__(None, None, None))
        url = server.url
    options = dict(timeout=0.5, retries=2, backoff=0.01, block_size=256, gap=0)
    dataset = make_dataset('deferred', augment=False, store_url=url, remote=options,
                           cache_dir=str(tmp_path / 'remote-cache'))
    model = tiny_gsnet()
    data = model.data_preprocessor(pseudo_collate([dataset[0]]), True)
    model(**data, mode='loss')  # a step that read its ranges
    server.kill()
    with pytest.raises(RemoteReadError, match=rf'{url}/store-[0-9a-f]+/\S+\.npy bytes \d+-\d+: '
                       ) as err:
        for index in range(1, len(dataset)):
            data = model.data_preprocessor(pseudo_collate([dataset[index]]), True)
            model(**data, mode='loss')
    # the failed request's own duration (what the read path reports), not the wall clock
    # around data loading and model steps, which machine load stretches: 1 s of slack for
    # the client's timers and threads, far below a request that hangs
    assert err.value.elapsed is not None and err.value.elapsed < read_bound(0.5, 2, 0.01) + 1.0
