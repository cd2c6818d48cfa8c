#!/usr/bin/env bash
# Regenerate tests/data/hggd_labels_golden/: a synthetic GraspNet-1Billion root (mmgrasp's
# environment) -> HGGD's convert_grasp.py, unmodified, in its own environment
# (setup_hggd_labels_env.sh), driven by make_hggd_labels_golden.py.
#
# Usage (from the repository root):
#   tools/analysis/golden/regenerate_hggd_labels.sh HGGD_SRC HGGD_VENV [WORK]
#   HGGD_SRC  a checkout of THU-VCLab/HGGD at 69580ff (convert_grasp.py, util.py,
#             customgraspnetAPI/); nothing of it is copied into this repository
#   HGGD_VENV the script's environment (setup_hggd_labels_env.sh)
#   WORK      a scratch folder (default: a new temporary one)
set -euo pipefail
src=${1:?usage: regenerate_hggd_labels.sh HGGD_SRC HGGD_VENV [WORK]}
venv=${2:?usage: regenerate_hggd_labels.sh HGGD_SRC HGGD_VENV [WORK]}
work=${3:-$(mktemp -d)}
out=tests/data/hggd_labels_golden
# 18 boxes a scene: the script draws 40 000 model points and 40 000 depth points (it raises
# below that); 20 label points an object keep its (n, 4, 40 000) refinement product under 2 GB;
# the real 300 x 12 x 4 grid (loadGrasp tiles 300 views, 12 angles, 4 depths); scene 0 holds
# one model twice
args='["--scenes", "2", "--frames", "2", "--objects", "18", "--points-per-object", "20",
       "--grid", "300", "12", "4", "--image-size", "640", "360", "--cameras", "realsense",
       "--test-scenes", "--duplicates", "1"]'
mapfile -t argv < <(python -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$args")
rm -rf "$work/synthetic"
PYTHONPATH=$PWD python tools/data/make_synthetic.py "$work/synthetic" "${argv[@]}" --quiet
mkdir -p "$out"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$venv/bin/python" tools/analysis/golden/make_hggd_labels_golden.py "$src" "$work/synthetic" \
    "$out/golden.npz" "$out/record.json" --scenes 0 1 --frames 2 --seed 0 \
    --make-synthetic-args "$(python -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$args")"
