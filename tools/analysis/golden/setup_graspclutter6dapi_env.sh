#!/usr/bin/env bash
# Build graspclutter6dAPI 0.0.3's evaluation environment (numpy 1.23.4, like graspnetAPI's).
# Only tools/analysis/golden/make_gc6d_eval_golden.py runs in it (tests/data/gc6d_golden/).
#
# Usage: setup_graspclutter6dapi_env.sh GC6D_VENV [BASE_VENV]
#   GC6D_VENV  where to create it
#   BASE_VENV  an existing graspnetAPI environment (setup_graspnetapi_env.sh) whose packages it
#              reuses through a .pth file: graspclutter6dAPI needs the same pinned set
#              (requirements-graspnetapi.txt, grasp_nms). Without it they are installed here.
set -euo pipefail
venv=${1:?usage: setup_graspclutter6dapi_env.sh GC6D_VENV [BASE_VENV]}
base=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
python3.11 -m venv "$venv"
pip="$venv/bin/pip"
if [ -n "$base" ]; then
    site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$site" > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_base_env.pth"
else
    "$pip" install --no-deps -r "$here/requirements-graspnetapi.txt"
    "$pip" install --no-deps --no-build-isolation --no-binary grasp_nms grasp_nms==1.0.2
fi
# PyPI 0.0.3 is newer than the repository head (whose loadGrasp raises a TypeError); its
# setup pins are the same set as graspnetAPI's, so no resolver run
"$pip" install --no-deps graspclutter6dapi==0.0.3
"$venv/bin/python" -c "from graspclutter6dAPI import GraspClutter6DEval; import numpy; assert numpy.__version__ == '1.23.4'" 2>/dev/null
echo "graspclutter6dAPI environment ready: $venv"
