"""The README's main job (tools/run_demo.sh after the installs) trains the GSNet demo on a fresh
synthetic dataset: checkpoints are written, the loss at the end is lower than at the start, and
the job ends with the AP table of the last checkpoint on the synthetic test scenes."""
import glob
import json
import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_main_job() -> str:
    with open(os.path.join(REPO, 'README.md')) as f:
        commands = re.findall(r'```bash\n(.*?)\n```', f.read(), re.S)
    assert len(commands) >= 2
    return commands[0]


@pytest.mark.slow
def test_readme_main_job_trains_the_demo(tmp_path):
    command = readme_main_job()
    assert command.startswith('pip install torch==2.13.0 && pip install -e . && ')
    job = command.split(' && ')[-1]
    assert job == 'bash tools/run_demo.sh'
    env = dict(os.environ, MMGRASP_DEMO_DATA=str(tmp_path / 'synthetic'),
               MMGRASP_DEMO_WORK_DIR=str(tmp_path / 'work'), MMGRASP_CACHE=str(tmp_path / 'cache'))
    out = subprocess.run(job, shell=True, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (scalars,) = glob.glob(str(tmp_path / 'work' / '*' / 'vis_data' / 'scalars.json'))
    with open(scalars) as f:
        losses = [json.loads(line)['loss'] for line in f if '"loss"' in line]
    assert len(losses) >= 6
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2, losses
    assert os.path.isfile(tmp_path / 'work' / 'epoch_6.pth')
    # the job ends with the GraspNet AP table of the last checkpoint on the synthetic test scenes
    table = out.stdout[out.stdout.rindex('| split |'):]
    for row in ('| seen | 4 |', '| similar | 4 |', '| novel | 4 |', '| camera | realsense |',
                '| collision threshold | 0.01 '):
        assert row in table, table
    assert os.path.isfile(tmp_path / 'work' / 'dump' / 'graspnet_realsense.json')
