"""Folders that the test processes of one run share: what several test files read is built
once per ``python -m pytest``, not once per pytest-xdist worker process."""
import os
import shutil
from typing import Callable

from filelock import FileLock


def run_folder(tmp_path_factory) -> str:
    """This run's folder for shared builds: pytest-xdist's worker processes of one run have
    their base temporary folders side by side in the run's own folder; without xdist it is the
    session's base folder."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        base = base.parent
    return os.path.join(str(base), 'run_wide')


def run_wide(tmp_path_factory, name: str, build: Callable[[str], None]) -> str:
    """The folder ``name`` (a relative path) of this run, written by ``build(folder)`` in the
    first test process that asks; the others wait for it under a lock and reuse it. A build
    that failed is redone by the next process that asks."""
    folder = os.path.join(run_folder(tmp_path_factory), name)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with FileLock(folder + '.lock'):
        if not os.path.isfile(folder + '.built'):
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            build(folder)
            open(folder + '.built', 'w').close()
    return folder
