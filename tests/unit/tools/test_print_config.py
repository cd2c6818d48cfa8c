"""tools/misc/print_config.py prints the resolved config with --cfg-options applied and every
secret-looking option redacted (what a training would log), and saves it the same way."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TOOL = os.path.join(REPO, 'tools', 'misc', 'print_config.py')


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, TOOL, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_print_config_resolves_overrides_and_redacts(tmp_path):
    saved = str(tmp_path / 'resolved.py')
    out = run('configs/gsnet_demo.py', '--cfg-options', 'train_cfg.max_epochs=3',
              'train_dataloader.dataset.pipeline.1.remote.storage_options.secret_access_key='
              'hunter2', 'train_dataloader.dataset.pipeline.1.remote.storage_options.'
              'endpoint=http://store:9000', '--save-path', saved)
    assert out.returncode == 0, out.stderr
    assert "max_epochs=3" in out.stdout and "type='GraspEpochBasedTrainLoop'" in out.stdout
    assert 'num_seeds=256' in out.stdout  # _base_ merged with the demo's own values
    assert 'hunter2' not in out.stdout and "secret_access_key='<redacted>'" in out.stdout
    assert 'http://store:9000' in out.stdout  # not a secret: kept
    with open(saved) as f:
        text = f.read()
    assert 'hunter2' not in text and '<redacted>' in text and 'max_epochs=3' in text


@pytest.mark.slow
def test_print_config_names_a_missing_config():
    out = run('configs/no_such.py')
    assert out.returncode != 0 and 'configs/no_such.py: no such config file' in out.stderr
