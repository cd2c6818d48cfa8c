"""Fixtures of the integration tests: trainings that more than one test reads, run once."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from _run_wide import run_folder, run_wide


@pytest.fixture(scope='session')
def amp_runs(synthetic_root, tmp_path_factory):
    """``amp_runs(name)``: ``(process, work_dir)`` of ``tools/train.py --amp`` on the demo
    config ``name`` shrunk for the session dataset (test_amp_training.amp_config), trained on
    the first request of the test run (``run_wide``: once for all test processes) and kept.
    test_amp_training asserts on them, and test_device_check's smoke run reports them
    (``MMGRASP_DEVICE_CHECK_AMP_RUNS``: the work dirs are ``<folder>/<config>``) instead of
    training the same recipes again. Read-only."""
    from test_amp_training import REPO, amp_config

    folder = os.path.join(run_folder(tmp_path_factory), 'amp_runs')

    def train(name: str, work_dir: str) -> None:
        out = subprocess.run([sys.executable, 'tools/train.py',
                              amp_config(pathlib.Path(folder), name, synthetic_root),
                              '--amp', '--work-dir', work_dir],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
        with open(os.path.join(work_dir, 'process.json'), 'w') as f:
            json.dump(dict(args=out.args, returncode=out.returncode, stdout=out.stdout,
                           stderr=out.stderr), f)

    def run(name: str):
        stem = name[:-len('.py')]
        work_dir = run_wide(tmp_path_factory, f'amp_runs/{stem}',
                            lambda work_dir: train(name, work_dir))
        with open(os.path.join(work_dir, 'process.json')) as f:
            return subprocess.CompletedProcess(**json.load(f)), work_dir

    run.folder = folder
    return run
