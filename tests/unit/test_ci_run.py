"""``.ci/run`` runs the README's test command verbatim and fails unless pytest passed: a run
that collected no test (pytest's exit 5) proves nothing and fails too."""
import os
import re
import stat
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, '.ci', 'run')


def _readme_test_command() -> str:
    with open(os.path.join(ROOT, 'README.md')) as f:
        lines = [line.strip() for line in f if 'python -m pytest' in line and 'pip install' in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_script_runs_the_readme_command_verbatim():
    with open(SCRIPT) as f:
        assert _readme_test_command() in [line.strip() for line in f]


def _shim(folder, name: str, body: str) -> None:
    path = os.path.join(folder, name)
    with open(path, 'w') as f:
        f.write(f'#!/bin/sh\n{body}\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


@pytest.mark.parametrize('pytest_rc, expected', [(0, 0), (1, 1), (5, 5), (2, 2)])
def test_the_script_fails_unless_pytest_passed(tmp_path, pytest_rc, expected):
    """``pip`` and ``python`` are stand-ins on PATH: the script's exit is pytest's, 5 included."""
    log = tmp_path / 'calls'
    _shim(str(tmp_path), 'pip', f'echo "pip $*" >> {log}')
    _shim(str(tmp_path), 'python', f'echo "python $*" >> {log}; exit {pytest_rc}')
    env = dict(os.environ, PATH=f'{tmp_path}{os.pathsep}{os.environ["PATH"]}')
    done = subprocess.run(['bash', SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == expected, done.stderr
    assert log.read_text().splitlines() == [
        'pip install torch==2.13.0', "pip install -e .[tests]", 'python -m pytest']
    assert ('collected no tests' in done.stderr) == (pytest_rc == 5)
