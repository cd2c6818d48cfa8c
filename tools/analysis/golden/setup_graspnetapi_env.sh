#!/usr/bin/env bash
# Build graspnetAPI's evaluation environment, separate from mmgrasp's (numpy 1.23.4 vs numpy 2).
# Only tools/analysis/golden/make_eval_golden.py runs in it, to (re)produce tests/data/eval_golden/.
#
# Usage: setup_graspnetapi_env.sh GRASPNETAPI_SRC GRASPNETAPI_VENV
#   GRASPNETAPI_SRC  a checkout of graspnetAPI's repository (the goldens used head bd6783c)
#   GRASPNETAPI_VENV where to create the environment
# Needs python3.11 and a C compiler (grasp_nms is built from its sdist).
set -euo pipefail
src=${1:?usage: setup_graspnetapi_env.sh GRASPNETAPI_SRC GRASPNETAPI_VENV}
venv=${2:?usage: setup_graspnetapi_env.sh GRASPNETAPI_SRC GRASPNETAPI_VENV}
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$src/graspnetAPI/graspnet_eval.py" ] || { echo "not a graspnetAPI checkout: $src" >&2; exit 2; }

python3.11 -m venv "$venv"
pip="$venv/bin/pip"
# every package pinned (a full freeze), so no resolver run: the same environment every time
"$pip" install --no-deps -r "$here/requirements-graspnetapi.txt"
# grasp_nms ships a Cython source that needs Cython 3 and numpy at build time: build it against
# the environment's own numpy/Cython instead of an isolated build environment
"$pip" install --no-deps --no-build-isolation --no-binary grasp_nms grasp_nms==1.0.2
# graspnetAPI's setup.py pins packages that do not exist (sklearn) or do not build on 3.11
"$pip" install --no-deps -e "$src"
"$venv/bin/python" -c "from graspnetAPI import GraspNetEval; import numpy; assert numpy.__version__ == '1.23.4'" 2>/dev/null
echo "graspnetAPI environment ready: $venv"
