"""The ``slow`` marker: registered in setup.cfg, on the trainings, and ``-m "not slow"`` (the
fast developer run of docs/get_started.md) deselects them while CI's plain ``python -m pytest`` runs all."""
import configparser
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Files with whole trainings (all slow) and one quick test (not slow) of the device check.
FILES = ('tests/integration/test_amp_training.py', 'tests/integration/test_device_check.py',
         'tests/integration/test_gsnet_training_identity.py')
QUICK = 'tests/integration/test_device_check.py::' \
        'test_device_check_refuses_to_run_without_mmengine_or_wheels'
THIS = 'tests/unit/test_slow_marker.py'


def test_slow_is_registered_in_the_pytest_config():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, 'setup.cfg'))
    markers = [line.split(':')[0].strip() for line in cfg['tool:pytest']['markers'].splitlines()
               if re.match(r'\w+:', line.strip())]
    assert 'slow' in markers and 'cuda' in markers


@pytest.fixture(scope='module')
def not_slow_collection() -> list:
    """Test ids that ``pytest --co -m "not slow"`` collects from this file, given first, and
    FILES."""
    out = subprocess.run([sys.executable, '-m', 'pytest', '--co', '-q', '-p', 'no:cacheprovider',
                          '-m', 'not slow', THIS, *FILES], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    # the three --amp runs, the smoke run and the GSNet identity training
    assert re.search(r'\d+/\d+ tests collected \(5 deselected\)', out.stdout), out.stdout[-500:]
    return [line for line in out.stdout.splitlines() if '::' in line]


def test_not_slow_deselects_the_trainings_and_keeps_the_rest(not_slow_collection):
    assert [t for t in not_slow_collection if not t.startswith(THIS)] == [QUICK]


def test_files_holding_a_slow_test_are_collected_first_and_whole(not_slow_collection):
    """pytest-xdist hands out whole files in collection order (setup.cfg: ``--dist loadfile
    --no-loadscope-reorder``): the device check's file, which holds slow tests, comes before
    this one, given before it, and its quick test with it."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, 'setup.cfg'))
    addopts = cfg['tool:pytest']['addopts'].split()
    assert '--no-loadscope-reorder' in addopts and 'loadfile' in addopts
    assert not_slow_collection[0] == QUICK
    assert len(not_slow_collection) > 1 and all(t.startswith(THIS + '::')
                                                for t in not_slow_collection[1:])


def test_the_docs_document_both_runs():
    with open(os.path.join(ROOT, 'docs', 'get_started.md')) as f:
        page = f.read()
    testing = page[page.index('\n## Run the tests'):]
    testing = testing[:testing.index('\n## ', 1)] if '\n## ' in testing[1:] else testing
    assert 'python -m pytest -m "not slow"' in testing
    assert '`.ci/run`' in testing and re.search(r'^python -m pytest +#', testing, re.M)

