"""tools/analysis/device_check.sh in its CPU mode (--cpu-smoke): every step runs at small sizes,
every CUDA test is collected and skips, and the results file holds each step's table. The
--amp trainings are the suite's own (the ``amp_runs`` fixture test_amp_training asserts on),
reported by the script as it reports its own, not trained a second time."""
import os
import subprocess
import sys

import pytest
from test_amp_training import SHRINK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_device_check_cpu_smoke_run(tmp_path, amp_runs):
    for name in SHRINK:
        amp_runs(name)
    results = tmp_path / 'out' / 'device_check.md'
    env = dict(os.environ, PYTHON=sys.executable, TMPDIR=str(tmp_path),
               MMGRASP_DEVICE_CHECK_AMP_RUNS=amp_runs.folder)
    env.pop('MMGRASP_DEVICE_CHECK', None)
    out = subprocess.run(['bash', 'tools/analysis/device_check.sh', '--cpu-smoke', str(results)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    text = results.read_text()
    assert out.returncode == 0, text[-4000:] + out.stderr[-3000:]
    assert text.startswith('# Device check (CPU smoke run, small sizes)')
    for section in ('## CUDA tests (pytest -m cuda)', '## Demo trainings with --amp',
                    '## Furthest-point sampling alone',
                    '## benchmark_loader.py, GSNet, dense against deferred',
                    '## benchmark_dispatch.py: kernel launches and host syncs per part',
                    '## Verdict'):
        assert section in text, section
    cuda = text.split('## CUDA tests')[1].split('\n## ')[0]
    count = int(cuda.split('tests:')[0].split()[-1])
    assert count >= 15 and f'{count} skipped' in cuda and '0 failed' in cuda
    assert 'test_cuda_identity::test_training_step_identical_on_cuda' in cuda
    amp = [line for line in text.split('## Demo trainings')[1].split('\n## ')[0].splitlines()
           if line.startswith('| ') and 'demo |' in line]
    assert len(amp) == 3 and all('CPUAmpOptimWrapper' in r and r.endswith('| yes |')
                                 for r in amp)
    assert 'not trained again' in text.split('## Demo trainings')[1].split('\n## ')[0]
    assert '| iteration (ms) |' in text and '|   backbone (ms) |' in text
    dispatch = [line for line in text.split('## benchmark_dispatch.py')[1].splitlines()
                if line.startswith('| gsnet_demo |')]
    assert [r.split(' | ')[1] for r in dispatch] == ['cuda_path (cpu)', 'torch_reference (cpu)']
    assert '| backbone |' in text and '| optimizer |' in text
    assert text.count('**passed**') == 5 and 'every step passed' in text
    assert not [p for p in os.listdir(tmp_path) if p.startswith('mmgrasp_device_check')]


def test_device_check_refuses_to_run_without_mmengine_or_wheels(tmp_path):
    """A bare machine without the carried wheels stops at once with a message saying how."""
    fake = tmp_path / 'python3'
    fake.write_text(f'#!/bin/sh\ncase "$*" in *"import mmengine, mmcv"*) exit 1;; esac\n'
                    f'exec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    checkout = tmp_path / 'repo'
    os.makedirs(checkout / 'tools' / 'analysis')
    with open(os.path.join(REPO, 'tools', 'analysis', 'device_check.sh')) as f:
        (checkout / 'tools' / 'analysis' / 'device_check.sh').write_text(f.read())
    out = subprocess.run(['bash', str(checkout / 'tools' / 'analysis' / 'device_check.sh'),
                          '--cpu-smoke', str(tmp_path / 'r.md')],
                         env=dict(os.environ, PYTHON=str(fake), TMPDIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and '--fetch-wheels' in out.stderr
