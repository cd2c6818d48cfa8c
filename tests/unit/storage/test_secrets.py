"""Storage options are judged by obstore's own configuration keys: every key obstore's stubs
name for S3, GCS and Azure is in the table, each secret one is refused where a store opens,
on the command line and in a config (and redacted), and each other one passes."""
import ast
import os

import pytest
from mmengine.config import Config

from mmgrasp.storage import LabelStoreError, open_remote_label_store
from mmgrasp.storage.remote.sources import RemoteReadError, open_source
from mmgrasp.storage.secrets import REDACTED, STORE_KEYS, redact, secret_paths
from mmgrasp.apis import apply_cli_options

obstore = pytest.importorskip('obstore')
STUBS = {'s3': ('_aws.pyi', 'S3Config'), 'gs': ('_gcs.pyi', 'GCSConfig'),
         'az': ('_azure.pyi', 'AzureConfig')}
SECRETS = sorted({(s, k) for s, keys in STORE_KEYS.items() for k, v in keys.items() if v})
PUBLIC = sorted({(s, k) for s, keys in STORE_KEYS.items() for k, v in keys.items() if not v})
URLS = {'s3': 's3://bucket/store', 'gs': 'gs://bucket/store', 'az': 'az://account/container'}
VALUE = 'c2VjcmV0LXZhbHVlLTEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI='  # what must never reach a log


def _stub_keys(scheme):
    folder = os.path.join(os.path.dirname(obstore.__file__), '_store')
    filename, name = STUBS[scheme]
    with open(os.path.join(folder, filename)) as f:
        tree = ast.parse(f.read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)]


@pytest.mark.parametrize('scheme', sorted(STUBS))
def test_every_key_obstore_names_is_classified(scheme):
    missing = sorted(set(_stub_keys(scheme)) - set(STORE_KEYS[scheme]))
    assert not missing, f'obstore {obstore.__version__} names {missing}: classify them'


def test_every_alias_in_the_table_is_a_key_obstore_accepts():
    """Names beyond the stubs' are aliases obstore's parser takes (not typos of ours)."""
    from obstore.store import from_url
    for scheme, keys in STORE_KEYS.items():
        stub = set(_stub_keys(scheme)) if scheme in STUBS else set()
        for name in sorted(set(keys) - stub):
            try:
                from_url(URLS[scheme], **{name: 'true'})
            except Exception as exc:  # noqa: BLE001 - a bad value is fine, an unknown key not
                assert 'is not valid for store' not in str(exc), (scheme, name, str(exc))


def test_secret_and_public_names_do_not_overlap():
    secret = {k for _, k in SECRETS}
    assert not secret & {k for _, k in PUBLIC}


@pytest.mark.parametrize('scheme, name', SECRETS)
def test_a_secret_key_is_refused_everywhere(tmp_path, scheme, name):
    from tools.data.build_label_store import storage_options
    for spelled in (name, name.upper()):
        options = {spelled: VALUE}
        with pytest.raises(LabelStoreError, match=rf'storage_options.{spelled} looks like a '
                                                  rf'credential'):
            open_remote_label_store(URLS[scheme], str(tmp_path), dict(storage_options=options))
        with pytest.raises(ValueError, match=rf'--storage-option {spelled} looks like a'):
            storage_options([f'{spelled}={VALUE}'])
        cfg = Config(dict(train_dataloader=dict(dataset=dict(pipeline=[dict(
            type='SampleGraspLabels', remote=dict(storage_options=dict(endpoint='http://h')))]))))
        key = f'train_dataloader.dataset.pipeline.0.remote.storage_options.{spelled}'
        with pytest.raises(SystemExit) as err:  # as tools/train.py --cfg-options KEY=VALUE
            apply_cli_options(cfg, 'c.py', {key: VALUE}, str(tmp_path))
        assert spelled in str(err.value) and VALUE not in str(err.value)
        redacted = redact(dict(remote=dict(storage_options=dict(options, region='eu'))))
        assert redacted['remote']['storage_options'] == {spelled: REDACTED, 'region': 'eu'}
        assert redact({spelled: VALUE}) == {spelled: REDACTED}  # a secret outside them too


@pytest.mark.parametrize('scheme, name', PUBLIC)
def test_a_public_key_passes(tmp_path, scheme, name):
    from tools.data.build_label_store import storage_options
    assert secret_paths(dict(storage_options={name: 'x'})) == []
    assert secret_paths(dict(storage_options={name.upper(): 'x'})) == []
    assert storage_options([f'{name}=x']) == {name: 'x'}
    cfg = Config(dict(remote=dict(storage_options={name: 'x'})))
    assert apply_cli_options(cfg, 'c.py', None, str(tmp_path)).remote.storage_options[name] == 'x'
    assert redact(dict(storage_options={name: 'x'})) == dict(storage_options={name: 'x'})


def test_skip_signature_reaches_the_client(tmp_path):
    """``skip_signature`` is accepted and given to obstore: the store then fails on the network
    (nothing listens), not on a refused option."""
    with pytest.raises(LabelStoreError) as err:
        open_remote_label_store('s3://bucket/store', str(tmp_path), dict(
            timeout=0.5, retries=0, storage_options=dict(
                skip_signature=True, endpoint='http://127.0.0.1:9', region='us-east-1')))
    assert 'credential' not in str(err.value) and '127.0.0.1:9' in str(err.value)


@pytest.mark.parametrize('name', ['key', 'secret', 'client_kwargs', 'proxy_url', 'anon'])
def test_a_name_obstore_does_not_know_is_refused_before_it_is_logged(tmp_path, name):
    """fsspec's names (``key``/``secret``), client options: no store key, so no way to tell
    them safe; the config check refuses them, and a source refuses them with its scheme."""
    assert secret_paths(dict(storage_options={name: VALUE})) == [f'storage_options.{name}']
    with pytest.raises(RemoteReadError, match=rf"storage_options \['{name}'\] are no obstore "
                                              rf'configuration keys of s3://'):
        open_source('s3://b/x', storage_options={name: 'x'}).read_whole('s3://b/x')


def test_http_takes_no_storage_option():
    with pytest.raises(RemoteReadError, match=r"\['region'\] are no obstore configuration"):
        open_source('http://127.0.0.1:9/x', storage_options=dict(region='x')).read_whole(
            'http://127.0.0.1:9/x')
