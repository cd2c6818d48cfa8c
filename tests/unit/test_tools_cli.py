"""The command-line tools as a user runs them: a subprocess, its exit status and its output."""
import os
import subprocess
import sys

import numpy as np
import pytest

from mmgrasp.storage.derived_assets import current_version
from mmgrasp.storage.labels.store import store_path_for
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, 'tools', 'data', 'build_label_store.py')


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('cli') / 'graspnet')
    write_synthetic_dataset(root, scenes=1, frames=2, objects=3, points_per_object=40,
                            grid=(5, 3, 3), image_size=(320, 180), cameras=('realsense',),
                            progress=False)
    return root


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, BUILD, *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.mark.slow
def test_build_label_store_builds_then_reuses(tiny_root, tmp_path):
    cache = str(tmp_path / 'cache')
    store = store_path_for(tiny_root, cache)
    first = _run(tiny_root, '--cache', cache)
    assert first.returncode == 0, first.stderr
    assert store in first.stdout
    assert 'objects: 3' in first.stdout and 'scenes: 1' in first.stdout
    assert '(5, 3, 3)' in first.stdout and 'built in' in first.stdout
    version = current_version(store)
    assert version in first.stdout
    assert np.load(os.path.join(version, 'objects', os.listdir(os.path.join(version, 'objects'))[0],
                                'scores.npy')).shape[1:] == (5, 3, 3)

    again = _run(tiny_root, '--cache', cache)
    assert again.returncode == 0, again.stderr
    assert 'up to date' in again.stdout and store in again.stdout

    forced = _run(tiny_root, '--cache', cache, '--force')
    assert forced.returncode == 0, forced.stderr
    assert 'built in' in forced.stdout


@pytest.mark.slow
def test_build_label_store_upload_publishes_a_readable_store(tiny_root, tmp_path):
    from mmgrasp.storage import open_remote_store
    cache, target = str(tmp_path / 'cache'), tmp_path / 'bucket'
    result = _run(tiny_root, '--cache', cache, '--upload', f'file://{target}')
    assert result.returncode == 0, result.stderr
    version = os.path.basename(current_version(store_path_for(tiny_root, cache)))
    assert f'published file://{target}/{version}' in result.stdout
    assert (target / 'CURRENT').read_text().strip() == version
    remote = open_remote_store(f'file://{target}', str(tmp_path / 'reader'))
    local = os.path.join(current_version(store_path_for(tiny_root, cache)), 'objects', '000',
                         'scores.npy')
    truth = np.load(local)
    out = np.empty((2, *truth.shape[1:]), np.float32)
    remote.read_rows([f'{remote.url}/objects/000/scores.npy'], np.zeros(2, np.int64),
                     np.array([0, len(truth) - 1]), truth.shape[1:], out)
    assert np.array_equal(out, truth[[0, -1]])
    refused = _run(tiny_root, '--cache', cache, '--upload', 'http://127.0.0.1:9/bucket')
    assert refused.returncode != 0 and 'HTTP has no standard upload' in refused.stderr
    assert 'Traceback' not in refused.stderr


@pytest.mark.slow
def test_build_label_store_missing_root_names_it(tmp_path):
    missing = str(tmp_path / 'no_such_root')
    result = _run(missing, '--cache', str(tmp_path / 'cache'))
    assert result.returncode != 0
    assert missing in result.stderr
    assert 'Traceback' not in result.stderr


@pytest.mark.slow
def test_build_label_store_not_a_dataset_is_a_message(tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    result = _run(str(empty), '--cache', str(tmp_path / 'cache'))
    assert result.returncode != 0
    assert os.path.join(str(empty), 'scenes') in result.stderr
    assert 'Traceback' not in result.stderr


def test_test_tool_settings_name_the_filters():
    from mmengine.config import Config
    tool = script_module('tools/test.py')
    bl = tool.test_settings(Config.fromfile(os.path.join(REPO, 'configs',
                                                         'graspnet_baseline_demo.py')))
    assert bl['objectness filter'] == 'on' and bl['camera'] == 'realsense'
    assert bl['collision threshold'].startswith('0.01 (voxel 0.01 m, approach 0.05 m')
    gs = Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_demo.py'))
    gs.model.test_cfg.collision_thresh = 0
    settings = tool.test_settings(gs)
    assert settings['collision threshold'] == 'off'
    assert settings['objectness filter'] == 'n/a (all seeds, GSNet)'
    assert settings['evaluator'].startswith('mmgrasp-graspnet-1')


@pytest.mark.slow
def test_build_label_store_uploads_to_s3_with_storage_options(tiny_root, tmp_path, s3_server,
                                                               monkeypatch):
    """``--storage-option endpoint=…`` reaches the client (the environment names no endpoint);
    the credentials come from the environment; a secret-looking option is refused."""
    from mmgrasp.storage import open_remote_store
    monkeypatch.delenv('AWS_ENDPOINT_URL')
    monkeypatch.delenv('AWS_ENDPOINT')
    cache, url = str(tmp_path / 'cache'), s3_server.url('labels')
    result = _run(tiny_root, '--cache', cache, '--upload', url,
                  '--storage-option', f'endpoint={s3_server.endpoint}')
    assert result.returncode == 0, result.stderr
    version = os.path.basename(current_version(store_path_for(tiny_root, cache)))
    assert f'published {url}/{version}' in result.stdout
    remote = open_remote_store(url, str(tmp_path / 'reader'),
                               storage_options=dict(endpoint=s3_server.endpoint))
    assert remote.url == f'{url}/{version}' and remote.manifest['published_url'] == remote.url
    refused = _run(tiny_root, '--cache', cache, '--upload', url,
                   '--storage-option', 'secret_access_key=abc')
    assert refused.returncode != 0 and 'Traceback' not in refused.stderr
    assert 'secret_access_key looks like a credential' in refused.stderr
