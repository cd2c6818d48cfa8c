"""The remote store over file://, http:// (the test range server) and s3:// (moto): exact rows,
one GET per coalesced range, versions recorded at publish and checked on every answer, clear
errors for a missing object and refused credentials."""
import json

import numpy as np
import pytest

from mmgrasp.storage import (RemoteFileChanged, RemoteNotFound, RemoteReadError,
                             open_remote_store)
from mmgrasp.storage.remote.sources import join_url

from _remote_helpers import SCORES, cached_blocks_are_true, expected, logged_blocks, read
from conftest import publish_over

OPTIONS = dict(block_size=256, gap=0, timeout=5.0, retries=1, backoff=0.01)


def open_published(published, tmp_path, **options):
    return open_remote_store(published.url, str(tmp_path / 'cache'), dict(OPTIONS, **options))


def no_blocks_of(store, rel):
    return logged_blocks(store, store._file(join_url(store.url, rel)).key) == []


def flipped(data: bytes) -> bytes:
    """The same size, the last byte (of the last row) changed."""
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_rows_equal_the_files(published, tmp_path):
    store = open_published(published, tmp_path)
    keys = [0, 3, 4, 17, 50, 89]
    assert np.array_equal(read(store, SCORES, keys), expected(published.version_dir, SCORES, keys))
    rows = [0, 1, 150]
    got = read(store, 'scenes/0000/collision.npy', rows, (11,), np.uint8)
    assert np.array_equal(got, expected(published.version_dir, 'scenes/0000/collision.npy', rows,
                                        (11,)))
    assert cached_blocks_are_true(store, published) > 0


def test_publish_records_every_files_etag(published, tmp_path):
    manifest = json.loads(published.truth('manifest.json'))
    assert manifest['published_url'].startswith('file://' if published.scheme != 's3' else 's3://')
    assert all(entry['etag'] for entry in manifest['files'].values())
    if published.scheme == 's3':  # moto's ETag: the MD5 of the content
        import hashlib
        assert manifest['files'][SCORES]['etag'] == \
            f'"{hashlib.md5(published.truth(SCORES)).hexdigest()}"'


def test_a_cold_read_is_one_get_per_coalesced_range(published_by_server, tmp_path):
    """No HEAD, no metadata request: each coalesced range is one GET, counted by the server."""
    server = published_by_server.server
    store = open_published(published_by_server, tmp_path)
    store.pop_stats()
    server.clear_log()
    keys = list(range(0, 90, 10))  # 9 rows of 336 bytes, 3360 bytes apart: 9 ranges at gap 0
    assert np.array_equal(read(store, SCORES, keys),
                          expected(published_by_server.version_dir, SCORES, keys))
    stats = store.pop_stats()
    gets = [e for e in server.requests('scores') if e.method == 'GET']
    assert stats.requests == len(gets) == len(keys)
    assert not [e for e in server.requests() if e.method != 'GET']


@pytest.mark.parametrize('scheme', ['file', 's3'])
def test_same_size_replacement_before_the_first_read_is_detected(scheme, tmp_path, version_dir,
                                                                 request):
    """The manifest's ETag is asked for (If-Match) from the very first range."""
    published = publish_over(scheme, tmp_path, version_dir, request)
    store = open_published(published, tmp_path)
    published.replace(SCORES, flipped(published.truth(SCORES)))
    with pytest.raises(RemoteFileChanged, match=r'objects/000/scores.npy bytes \d+-\d+: the file '
                                                r'was replaced on the server'):
        read(store, SCORES, [3])
    assert no_blocks_of(store, SCORES)


def test_replacement_after_a_read_and_a_listing_is_detected(published, tmp_path):
    """A file replaced mid-run, after its first answers and after the store was listed (no
    listing cache answers for the server)."""
    store = open_published(published, tmp_path)
    read(store, SCORES, [0])
    if published.scheme == 's3':
        client = published.server.client()
        listed = client.list_objects_v2(Bucket=published.server.bucket)['Contents']
        assert any(item['Key'].endswith(SCORES) for item in listed)
    published.replace(SCORES, flipped(published.truth(SCORES)))
    with pytest.raises(RemoteFileChanged, match=r'scores.npy bytes \d+-\d+: the file was replaced'):
        read(store, SCORES, [50])
    assert no_blocks_of(store, SCORES) and cached_blocks_are_true(store, published) == 0


def test_a_missing_object_names_the_url(published, tmp_path):
    store = open_published(published, tmp_path)
    published.remove(SCORES)
    with pytest.raises(RemoteNotFound, match=r'/store-0123abcd/objects/000/scores.npy bytes '
                                             r'\d+-\d+: not found'):
        read(store, SCORES, [7])
    assert no_blocks_of(store, SCORES)
    if published.server is not None:  # a 404 is not retried
        assert len([e for e in published.requests('000/scores') if e.method == 'GET']) == 1


def test_wrong_credentials_name_the_url(s3_server, tmp_path, version_dir, monkeypatch):
    from mmgrasp.storage import publish_store
    publish_store(version_dir, s3_server.url('published'))
    monkeypatch.setenv('AWS_ACCESS_KEY_ID', 'not-the-key')
    s3_server.clear_log()
    with pytest.raises(RemoteReadError, match=rf'{s3_server.url("published")}/CURRENT: access '
                                              r'refused: the credentials .* are wrong'):
        open_remote_store(s3_server.url('published'), str(tmp_path / 'cache'), OPTIONS)
    assert [e.status for e in s3_server.requests('CURRENT')] == [403]  # not retried


def test_storage_options_reach_the_client(s3_server, tmp_path, version_dir, monkeypatch):
    """The endpoint from ``storage_options`` (not the environment) is where requests go."""
    from mmgrasp.storage import publish_store
    monkeypatch.delenv('AWS_ENDPOINT_URL')
    monkeypatch.delenv('AWS_ENDPOINT')
    options = dict(endpoint=s3_server.endpoint)
    publish_store(version_dir, s3_server.url('published'), storage_options=options)
    store = open_remote_store(s3_server.url('published'), str(tmp_path / 'cache'), OPTIONS,
                              storage_options=options)
    assert np.array_equal(read(store, SCORES, [1]), expected(version_dir, SCORES, [1]))
    with pytest.raises(RemoteReadError, match=r'CURRENT: .*127\.0\.0\.9'):
        open_remote_store(s3_server.url('published'), str(tmp_path / 'other'),
                          dict(OPTIONS, timeout=0.5, retries=0),
                          storage_options=dict(endpoint='http://127.0.0.9:9'))


def test_timeouts_and_retries_are_set_once(s3_server, tmp_path):
    with pytest.raises(ValueError, match=r"\['retry_config'\]: timeouts and retries are set once"):
        open_remote_store(s3_server.url('published'), str(tmp_path / 'cache'),
                          storage_options=dict(retry_config={}))


def test_an_unknown_storage_option_names_the_url(s3_server, tmp_path):
    with pytest.raises(RemoteReadError, match=rf'{s3_server.url("published")}/CURRENT: cannot '
                                              r'open a client for s3://'):
        open_remote_store(s3_server.url('published'), str(tmp_path / 'cache'), OPTIONS,
                          storage_options=dict(endpoint_typo='http://127.0.0.1:9'))


@pytest.mark.parametrize('scheme', ['file', 'http'])
def test_a_scheme_without_configuration_refuses_storage_options(scheme, tmp_path, version_dir,
                                                                request):
    """file:// and http:// take no obstore configuration: an option given for them (one an
    object store would use, such as an endpoint) is refused naming it, not ignored."""
    published = publish_over(scheme, tmp_path, version_dir, request)
    with pytest.raises(RemoteReadError, match=rf"{published.url}/CURRENT: cannot open a client "
                                              rf"for {scheme}://.*storage_options \['endpoint', "
                                              rf"'region'\] are no obstore configuration keys of "
                                              rf"{scheme}:// \(it takes none: drop them\)"):
        open_remote_store(published.url, str(tmp_path / 'cache'), OPTIONS,
                          storage_options=dict(endpoint='http://127.0.0.1:9', region='eu'))
    assert read(open_published(published, tmp_path), SCORES, [1]).shape[0] == 1
