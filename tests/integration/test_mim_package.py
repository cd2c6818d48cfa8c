"""A wheel of mmgrasp carries what ``mim`` reads from an installed package (setup.py):
``mmgrasp/.mim/`` with model-index.yml, every metafile and every config it lists, and the
tools ``mim train`` / ``mim test`` run; the source tree it was built from gets no copies."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = ('setup.py', 'setup.cfg', 'MANIFEST.in', 'README.md', 'model-index.yml', 'mmgrasp',
           'configs', 'tools', 'demo')


@pytest.mark.slow
def test_the_wheel_carries_the_mim_files(tmp_path):
    src = tmp_path / 'src'
    src.mkdir()
    for name in SOURCES:
        path = os.path.join(REPO, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns(
                '__pycache__', '.mim', '*.egg-info'))
        else:
            shutil.copy(path, src / name)
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q',
         '-w', str(tmp_path / 'dist'), str(src)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel, ) = (tmp_path / 'dist').glob('mmgrasp-*.whl')
    names = set(zipfile.ZipFile(wheel).namelist())
    mim = 'mmgrasp/.mim/'
    with open(os.path.join(REPO, 'model-index.yml')) as f:
        metafiles = yaml.safe_load(f)['Import']
    expected = {'model-index.yml', 'tools/train.py', 'tools/test.py', *metafiles}
    for metafile in metafiles:
        with open(os.path.join(REPO, metafile)) as f:
            meta = yaml.safe_load(f)
        expected |= {m['Config'] for m in meta['Models']}
        expected.add(meta['Collections'][0]['README'])
    assert not {mim + e for e in expected} - names, sorted({mim + e for e in expected} - names)
    assert 'mmgrasp/__init__.py' in names
    assert not (src / 'mmgrasp' / '.mim').exists()  # copies go to the build folder only
