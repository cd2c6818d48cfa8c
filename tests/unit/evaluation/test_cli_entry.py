"""The mmgrasp-eval console entry point (setup.cfg) resolves to the evaluation CLI and exits 0
after a run (main's figures are not taken for an exit status)."""
import configparser
import importlib
import os
import subprocess
import sys

import pytest
from eval_data import top_down_grasp, write_dump, write_eval_dataset

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))


@pytest.mark.slow
def test_entry_point_runs(tmp_path):
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, 'setup.cfg'))
    scripts = dict(line.split('=', 1) for line in
                   cfg['options.entry_points']['console_scripts'].strip().splitlines())
    target = scripts['mmgrasp-eval '].strip()
    module, func = target.split(':')
    assert callable(getattr(importlib.import_module(module), func))
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=1)
    write_dump(dump, 100, 0, [top_down_grasp(0.9, centres[0])])
    # what the installed script does: sys.exit(console())
    code = f'import sys; from {module} import {func}; sys.argv[1:] = sys.argv[1:]; ' \
           f'sys.exit({func}())'
    out = subprocess.run([sys.executable, '-c', code, root, dump, '--camera', 'realsense',
                          '--scenes', '100', '--no-progress'], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert '| seen | 1 |' in out.stdout and 'sampled: 1 of 7680 frames' in out.stdout
