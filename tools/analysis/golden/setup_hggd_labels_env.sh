#!/usr/bin/env bash
# Build the environment HGGD's convert_grasp.py runs in, separate from mmgrasp's (numpy 1.23,
# open3d, grasp_nms). Only tools/analysis/golden/make_hggd_labels_golden.py runs in it, to (re)produce
# tests/data/hggd_labels_golden/.
#
# Usage: setup_hggd_labels_env.sh HGGD_VENV   (where to create it)
# The script's imports (cv2, open3d, its vendored graspnetAPI's trimesh, autolab_core, cvxopt,
# transforms3d, ...) are graspnetAPI's; they come from the same pinned list as graspnetAPI's
# evaluation environment, with numpy at HGGD's own pin. Nothing is stubbed.
# Needs python3.11 and a C compiler (grasp_nms is built from its sdist).
set -euo pipefail
venv=${1:?usage: setup_hggd_labels_env.sh HGGD_VENV}
here=$(cd "$(dirname "$0")" && pwd)
python3.11 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install --no-deps -r "$here/requirements-graspnetapi.txt"
"$pip" install --no-deps numpy==1.23.5  # HGGD's requirements.txt
"$pip" install --no-deps --no-build-isolation --no-binary grasp_nms grasp_nms==1.0.2
"$venv/bin/python" -c "import numpy, open3d, grasp_nms, cv2, trimesh, autolab_core; assert numpy.__version__ == '1.23.5'"
echo "HGGD environment ready: $venv"
