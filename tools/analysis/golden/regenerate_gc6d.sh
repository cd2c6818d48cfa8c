#!/usr/bin/env bash
# Regenerate tests/data/gc6d_golden/: synthetic GraspClutter6D dataset -> dumps (mmgrasp's
# environment) -> graspclutter6dAPI 0.0.3's eval_scene (its own environment, see
# setup_graspclutter6dapi_env.sh), run on a copy of the dataset.
#
# Usage (from the repository root): tools/analysis/golden/regenerate_gc6d.sh GC6D_VENV [WORK]
#   GC6D_VENV  graspclutter6dAPI's environment (setup_graspclutter6dapi_env.sh)
#   WORK       a scratch folder (default: a new temporary one)
set -euo pipefail
venv=${1:?usage: regenerate_gc6d.sh GC6D_VENV [WORK]}
work=${2:-$(mktemp -d)}
out=tests/data/gc6d_golden
# train scene 1, test scenes 2 (one model twice) and 3, 2 annotations x 4 cameras, 4 boxes
args='["--layout", "graspclutter6d", "--scenes", "1", "--test-scenes", "2", "--frames", "2",
       "--objects", "4", "--points-per-object", "40", "--grid", "6", "3", "2",
       "--image-size", "320", "180"]'
mapfile -t argv < <(python -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$args")
rm -rf "$work/synthetic" "$work/dumps"
PYTHONPATH=$PWD python tools/data/make_synthetic.py "$work/synthetic" "${argv[@]}" --quiet
PYTHONPATH=$PWD python tools/analysis/golden/make_gc6d_golden_dumps.py "$work/synthetic" \
    "$work/dumps" --cameras realsense-d435 zivid --frames 2 \
    --make-synthetic-args "$(python -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$args")"
rm -rf "$out/dumps"
mkdir -p "$out"
cp -r "$work/dumps" "$out/dumps"
mv "$out/dumps/dataset.json" "$work/dataset.json"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$venv/bin/python" tools/analysis/golden/make_gc6d_eval_golden.py "$work/synthetic" "$out" \
    --cameras realsense-d435 zivid --seed 0 --dataset-info "$work/dataset.json" \
    --dump gt="$out/dumps/gt" --dump random="$out/dumps/random" --dump shifted="$out/dumps/shifted"
