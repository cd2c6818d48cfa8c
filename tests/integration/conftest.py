"""Fixtures of the integration tests: trainings that more than one test reads, run once."""
import subprocess
import sys

import pytest


@pytest.fixture(scope='session')
def amp_runs(synthetic_root, tmp_path_factory):
    """``amp_runs(name)``: ``(process, work_dir)`` of ``tools/train.py --amp`` on the demo
    config ``name`` shrunk for the session dataset (test_amp_training.amp_config), trained on
    the first request and kept for the session. test_amp_training asserts on them, and
    test_device_check's smoke run reports them (``MMGRASP_DEVICE_CHECK_AMP_RUNS``: the work
    dirs are ``<folder>/<config>``) instead of training the same recipes again. Read-only."""
    from test_amp_training import REPO, amp_config

    folder = tmp_path_factory.mktemp('amp_runs')
    runs = {}

    def run(name: str):
        if name not in runs:
            work_dir = str(folder / name[:-len('.py')])
            out = subprocess.run([sys.executable, 'tools/train.py',
                                  amp_config(folder, name, synthetic_root), '--amp',
                                  '--work-dir', work_dir],
                                 cwd=REPO, capture_output=True, text=True, timeout=600)
            runs[name] = out, work_dir
        return runs[name]

    run.folder = str(folder)
    return run
