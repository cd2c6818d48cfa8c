"""Packaging: the metadata is in setup.cfg. This file adds, the OpenMMLab way, what ``mim``
reads from an installed package: ``mmgrasp/.mim/`` holding ``model-index.yml``, ``configs/``,
``tools/`` and ``demo/`` (so ``mim search mmgrasp`` lists the models of the metafiles and
``mim train`` / ``mim test`` find the configs and tools).

A wheel (``pip install .``, sdist, bdist_wheel) gets copies in its build folder, never in the
source tree. An editable install (``pip install -e .``) gets relative symlinks in the source
tree (git-ignored), so they always show the working tree's files.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

REPO = os.path.dirname(os.path.abspath(__file__))
MIM_ENTRIES = ('model-index.yml', 'configs', 'tools', 'demo')


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def add_mim_files(mim_dir: str, link: bool) -> None:
    """Put each of MIM_ENTRIES under ``mim_dir``: a relative symlink or a copy."""
    os.makedirs(mim_dir, exist_ok=True)
    for name in MIM_ENTRIES:
        source, target = os.path.join(REPO, name), os.path.join(mim_dir, name)
        if not os.path.exists(source):
            continue
        _remove(target)
        if link:
            os.symlink(os.path.relpath(source, mim_dir), target)
        elif os.path.isdir(source):
            shutil.copytree(source, target,
                            ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
        else:
            shutil.copyfile(source, target)


class BuildPyWithMim(build_py):
    """build_py plus ``mmgrasp/.mim``: copied into a wheel, linked for an editable install."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            add_mim_files(os.path.join(REPO, 'mmgrasp', '.mim'), link=True)
        else:
            add_mim_files(os.path.join(self.build_lib, 'mmgrasp', '.mim'), link=False)


setup(cmdclass={'build_py': BuildPyWithMim})
