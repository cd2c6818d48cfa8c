"""tests/_run_wide.py: what several test files read is built once per run, by the first
pytest-xdist worker that asks; the others wait for it; a failed build is redone."""
import multiprocessing
import os
import time

import pytest

from _run_wide import run_wide


class _Factory:
    """The part of pytest's tmp_path_factory that run_wide reads, for worker ``name``."""

    def __init__(self, run, name):
        self.base = run / f'popen-{name}'

    def getbasetemp(self):
        return self.base


def _ask(run, worker, log):
    os.environ['PYTEST_XDIST_WORKER'] = worker

    def build(folder):
        with open(log, 'a') as f:
            f.write(f'{worker}\n')
        time.sleep(0.5)  # the other process asks meanwhile
        with open(os.path.join(folder, 'data'), 'w') as f:
            f.write(worker)

    folder = run_wide(_Factory(run, worker), 'shared', build)
    with open(os.path.join(folder, 'data')) as f:
        assert f.read() in ('gw0', 'gw1')


def test_two_workers_share_one_build(tmp_path):
    log = tmp_path / 'builds.txt'
    context = multiprocessing.get_context('fork')
    workers = [context.Process(target=_ask, args=(tmp_path, w, str(log))) for w in ('gw0', 'gw1')]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0, 0]
    assert len(log.read_text().split()) == 1  # built once, reused by the other worker
    assert sorted(os.listdir(tmp_path / 'run_wide' / 'shared')) == ['data']


def test_a_failed_build_is_redone(tmp_path, monkeypatch):
    monkeypatch.setenv('PYTEST_XDIST_WORKER', 'gw0')
    factory = _Factory(tmp_path, 'gw0')

    def broken(folder):
        open(os.path.join(folder, 'half'), 'w').close()
        raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        run_wide(factory, 'shared', broken)
    folder = run_wide(factory, 'shared', lambda f: open(os.path.join(f, 'whole'), 'w').close())
    assert os.listdir(folder) == ['whole']  # the half-written folder is gone
    assert run_wide(factory, 'shared', broken) == folder  # built: not built again


def test_without_xdist_the_sessions_own_folder(tmp_path, monkeypatch):
    monkeypatch.delenv('PYTEST_XDIST_WORKER', raising=False)
    folder = run_wide(_Factory(tmp_path, 'x'), 'shared', lambda f: None)
    assert folder == str(tmp_path / 'popen-x' / 'run_wide' / 'shared')
