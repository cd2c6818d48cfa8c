"""Evaluate a dump folder with GraspNet-1Billion's protocol: the ``mmgrasp-eval`` command
(:mod:`mmgrasp.evaluation.cli`; its docstring lists the options).

    python tools/analysis/eval_dump.py DATA_ROOT DUMP --camera realsense --split seen [--json OUT]
    python tools/analysis/eval_dump.py DATA_ROOT DUMP --camera kinect --scenes 100 101 --nproc 4
"""
from mmgrasp.evaluation.cli import console, main  # noqa: F401 - main: the tests call it

if __name__ == '__main__':
    console()
