"""A wheel of mmgrasp carries what ``mim`` reads from an installed package (setup.py):
``mmgrasp/.mim/`` with model-index.yml, every metafile and every config it lists, and the
tools ``mim train`` / ``mim test`` run; the source tree it was built from gets no copies. The
mim instructions of docs/user_guides/train_test.md run as written in a fresh environment."""
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = ('setup.py', 'setup.cfg', 'MANIFEST.in', 'README.md', 'model-index.yml', 'mmgrasp',
           'configs', 'tools', 'demo')


def _copy_sources(src):
    """The files a wheel is built from, without build outputs or an editable install's links."""
    src.mkdir()
    for name in SOURCES:
        path = os.path.join(REPO, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns(
                '__pycache__', '.mim', '*.egg-info'))
        else:
            shutil.copy(path, src / name)
    return src


@pytest.mark.slow
def test_the_wheel_carries_the_mim_files(tmp_path):
    src = _copy_sources(tmp_path / 'src')
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q',
         '-w', str(tmp_path / 'dist'), str(src)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel, ) = (tmp_path / 'dist').glob('mmgrasp-*.whl')
    names = set(zipfile.ZipFile(wheel).namelist())
    mim = 'mmgrasp/.mim/'
    with open(os.path.join(REPO, 'model-index.yml')) as f:
        metafiles = yaml.safe_load(f)['Import']
    expected = {'model-index.yml', 'tools/train.py', 'tools/test.py', *metafiles}
    for metafile in metafiles:
        with open(os.path.join(REPO, metafile)) as f:
            meta = yaml.safe_load(f)
        expected |= {m['Config'] for m in meta['Models']}
        expected.add(meta['Collections'][0]['README'])
    assert not {mim + e for e in expected} - names, sorted({mim + e for e in expected} - names)
    assert 'mmgrasp/__init__.py' in names
    assert not (src / 'mmgrasp' / '.mim').exists()  # copies go to the build folder only


def mim_commands() -> list:
    """The command lines of the "With mim" block of docs/user_guides/train_test.md."""
    with open(os.path.join(REPO, 'docs', 'user_guides', 'train_test.md')) as f:
        text = f.read()
    section = text[text.index('## With mim'):]
    block = re.search(r'```bash\n(.*?)\n```', section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_mim_instructions_run_as_written(tmp_path):
    """The documented mim commands, verbatim, in a fresh virtual environment (with the system's
    packages, so torch and the other requirements are not downloaded again) and a fresh copy of
    the sources: the pins hold (pip reports no conflict, setuptools stays in [77.0.3, 81)),
    ``mim train`` before the dataset step ends in mmgrasp's one line, and after it trains. The
    one change: the training line runs one epoch (``--cfg-options train_cfg.max_epochs=1``)."""
    commands = mim_commands()
    assert commands[0].startswith('pip install ') and commands[1] == 'pip install .'
    assert commands[-1] == 'mim train mmgrasp configs/gsnet_demo.py'
    assert commands[2].startswith('python tools/data/make_synthetic.py data/synthetic ')
    src = _copy_sources(tmp_path / 'src')
    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--system-site-packages', str(venv)],
                   check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    env.update(PATH=os.pathsep.join([str(venv / 'bin'), env['PATH']]), VIRTUAL_ENV=str(venv),
               MMGRASP_CACHE=str(tmp_path / 'cache'), PIP_DISABLE_PIP_VERSION_CHECK='1')

    def run(line, cwd=src, timeout=900):
        done = subprocess.run(line, shell=True, cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
        return done, done.stdout + done.stderr

    for line in commands[:2]:
        done, out = run(line)
        assert done.returncode == 0 and 'ERROR' not in out, out[-3000:]
    done, out = run('python -c "import setuptools, mmgrasp; print(setuptools.__version__); '
                    'print(mmgrasp.__file__)"', cwd=tmp_path)  # not the checkout's package
    version, where = done.stdout.split()
    assert (77, 0, 3) <= tuple(int(v) for v in version.split('.')[:3]) < (81, ), version
    assert where.startswith(str(venv)), where  # the installed copy, not a checkout

    done, out = run(commands[-1])  # before the dataset step
    assert done.returncode != 0
    ours = [line for line in out.splitlines() if 'data root data/synthetic' in line]
    assert len(ours) == 1 and 'make_synthetic.py data/synthetic' in ours[0], out[-3000:]
    assert 'DatasetFileError' not in out and out.count('Traceback') <= 1  # mim's check_call

    for line in commands[2:-1]:
        done, out = run(line)
        assert done.returncode == 0, out[-3000:]
    done, out = run(commands[-1] + ' --cfg-options train_cfg.max_epochs=1')
    assert done.returncode == 0 and 'Training finished successfully' in out, out[-3000:]
    assert (src / 'work_dirs' / 'gsnet_demo' / 'epoch_1.pth').is_file()
