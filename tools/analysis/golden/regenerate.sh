#!/usr/bin/env bash
# Regenerate tests/data/eval_golden/: synthetic dataset -> dumps (mmgrasp's environment) ->
# graspnetAPI's evaluation (its own environment, see setup_graspnetapi_env.sh).
#
# Usage (from the repository root): tools/analysis/golden/regenerate.sh [GNAPI_VENV] [WORK]
set -euo pipefail
venv=${1:-/work/gnapi-venv}
work=${2:-$(mktemp -d)}
out=tests/data/eval_golden
# the dataset: 1 training scene, test scenes 100/130/160 (seen/similar/novel), 2 frames, 5 boxes
args='["--scenes", "1", "--frames", "2", "--objects", "5", "--points-per-object", "40",
       "--grid", "6", "3", "2", "--image-size", "320", "180", "--cameras", "realsense",
       "--test-scenes", "100", "130", "160"]'
mapfile -t argv < <(python -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$args")
rm -rf "$work/synthetic" "$work/dumps"
PYTHONPATH=$PWD python tools/data/make_synthetic.py "$work/synthetic" "${argv[@]}" --quiet
PYTHONPATH=$PWD python tools/analysis/golden/make_golden_dumps.py "$work/synthetic" \
    "$work/dumps" --camera realsense --scenes 100 130 160 --frames 2 \
    --make-synthetic-args "$(python -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$args")"
rm -rf "$out/dumps"
mkdir -p "$out"
cp -r "$work/dumps" "$out/dumps"
mv "$out/dumps/dataset.json" "$work/dataset.json"
# one process, one thread: the timing is graspnetAPI's speed on one core
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$venv/bin/python" tools/analysis/golden/make_eval_golden.py "$work/synthetic" "$out" \
    --camera realsense --scenes 100 130 160 --frames 2 --seed 0 \
    --dataset-info "$work/dataset.json" \
    --dump gt="$out/dumps/gt" --dump random="$out/dumps/random" \
    --dump shifted="$out/dumps/shifted" --dump edge="$out/dumps/edge"
