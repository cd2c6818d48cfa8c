"""A published store is untrusted: its manifest, store id and CURRENT never make the reader
write outside its cache folder (over file:// and http://)."""
import json
import os

import numpy as np
import pytest

from mmgrasp.storage import RemoteStoreError, open_remote_store

ATTACKER = np.arange(5, dtype=np.float32)


def _tamper(published: str, tmp_path, change: str) -> None:
    """Rewrite the published manifest (or CURRENT) as a hostile server would."""
    version = os.path.join(published, 'store-0123abcd')
    with open(os.path.join(version, 'manifest.json')) as f:
        manifest = json.load(f)
    outside = tmp_path / 'x'  # what '../../x' reaches from the version folder
    outside.mkdir(exist_ok=True)
    np.save(outside / 'points.npy', ATTACKER)
    entry = dict(manifest['files']['objects/000/points.npy'],
                 size=os.path.getsize(outside / 'points.npy'))
    if change == 'dotdot key':
        manifest['files']['../../x/points.npy'] = entry
    elif change == 'absolute key':
        manifest['files'][f'{outside}/points.npy'] = entry
    elif change == 'store id':
        manifest['store_id'] = '../../evil'
    elif change == 'current':
        with open(os.path.join(published, 'CURRENT'), 'w') as f:
            f.write('../published/store-0123abcd\n')
        return
    with open(os.path.join(version, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)


def _written_outside(cache: str, tmp_path) -> list:
    """Files under tmp_path written after the open that are neither in the cache's remote
    folders nor the fixture's own."""
    found = []
    for folder, _, names in os.walk(tmp_path):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, tmp_path)
            if rel.split(os.sep)[0] in ('built', 'published', 'x'):
                continue
            if rel.startswith('cache' + os.sep) and rel.split(os.sep)[1].startswith('remote-'):
                continue
            found.append(rel)
    return found


@pytest.mark.parametrize('scheme', ['file', 'http'])
@pytest.mark.parametrize('change', ['dotdot key', 'absolute key', 'store id', 'current'])
def test_hostile_manifest_is_refused_and_writes_nothing_outside(served, tmp_path, scheme,
                                                               change):
    server, published, _ = served
    _tamper(published, tmp_path, change)
    url = server.url if scheme == 'http' else f'file://{published}'
    cache = str(tmp_path / 'cache')
    with pytest.raises(RemoteStoreError, match='plain name|relative path of plain names'):
        open_remote_store(url, cache)
    assert _written_outside(cache, tmp_path) == []
    assert not (tmp_path / 'cache' / 'x').exists() and not (tmp_path / 'cache' / 'evil').exists()


def test_untampered_store_opens(served, tmp_path):
    server, published, _ = served
    store = open_remote_store(server.url, str(tmp_path / 'cache'))
    assert os.path.isfile(store.local_copy(f'{store.url}/objects/000/points.npy'))


def test_an_etag_that_would_inject_a_header_is_refused(served, tmp_path):
    _, published, _ = served
    path = os.path.join(published, 'store-0123abcd', 'manifest.json')
    with open(path) as f:
        manifest = json.load(f)
    manifest['files']['objects/000/points.npy']['etag'] = '"x"\r\nAuthorization: evil'
    with open(path, 'w') as f:
        json.dump(manifest, f)
    with pytest.raises(RemoteStoreError, match=r"objects/000/points.npy' has an ETag that is not "
                                               r"a short printable string"):
        open_remote_store(f'file://{published}', str(tmp_path / 'cache'))
