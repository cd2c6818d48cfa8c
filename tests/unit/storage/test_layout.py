"""The storage package's layout: parts in folders, no test code installed. (Its imports: no
circle, no layer above it, no private name across modules: tests/unit/test_import_layers.py,
for the whole package.)"""
import pathlib

import mmgrasp.storage

STORAGE = pathlib.Path(mmgrasp.storage.__file__).parent
PARTS = {'labels', 'readers', 'frames', 'remote'}
SHARED = {'__init__', 'source', 'derived_assets', 'secrets'}


def test_parts_are_folders():
    flat = {p.stem for p in STORAGE.glob('*.py')}
    folders = {p.name for p in STORAGE.iterdir() if p.is_dir() and p.name != '__pycache__'}
    assert flat == SHARED and folders == PARTS


def test_no_test_server_in_the_installed_package():
    sources = [p.read_text() for p in STORAGE.parent.rglob('*.py')]
    assert not any('BaseHTTPRequestHandler' in text for text in sources)
