#!/usr/bin/env bash
# Regenerate tests/data/eval_golden/: synthetic dataset -> dumps (mmgrasp's environment) ->
# graspnetAPI's evaluation (its own environment, see setup_graspnetapi_env.sh). Three sets:
#   tests/data/eval_golden/                  boxes, RealSense
#   tests/data/eval_golden/curved_realsense/ cylinders, spheres, capsules, a torus, an L, a box
#   tests/data/eval_golden/curved_kinect/    the same models, Kinect
# (the curved models alternate ASCII and binary PLY files).
#
# Usage (from the repository root): tools/analysis/golden/regenerate.sh GRASPNETAPI_VENV [WORK]
#   GRASPNETAPI_VENV  graspnetAPI's environment (setup_graspnetapi_env.sh)
#   WORK              a scratch folder (default: a new temporary one)
set -euo pipefail
venv=${1:?usage: regenerate.sh GRASPNETAPI_VENV [WORK]}
work=${2:-$(mktemp -d)}
# the datasets: 1 training scene, test scenes 100/130/160 (seen/similar/novel), 2 frames, 5 objects
common='"--scenes", "1", "--frames", "2", "--objects", "5", "--points-per-object", "40",
        "--grid", "6", "3", "2", "--image-size", "320", "180", "--test-scenes", "100", "130", "160"'
curved='"--shapes", "cylinder", "sphere", "capsule", "torus", "lshape", "box",
        "--ply-formats", "ascii", "binary"'

golden_set() {  # OUT CAMERA ARGS_JSON
    local out=$1 camera=$2 args=$3 w="$work/$(basename "$1")"
    local argv
    mapfile -t argv < <(python -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$args")
    rm -rf "$w" && mkdir -p "$w"
    PYTHONPATH=$PWD python tools/data/make_synthetic.py "$w/synthetic" "${argv[@]}" --quiet
    PYTHONPATH=$PWD python tools/analysis/golden/make_golden_dumps.py "$w/synthetic" \
        "$w/dumps" --camera "$camera" --scenes 100 130 160 --frames 2 \
        --make-synthetic-args "$(python -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$args")"
    rm -rf "$out/dumps"
    mkdir -p "$out"
    cp -r "$w/dumps" "$out/dumps"
    mv "$out/dumps/dataset.json" "$w/dataset.json"
    # one process, one thread: the timing is graspnetAPI's speed on one core
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        "$venv/bin/python" tools/analysis/golden/make_eval_golden.py "$w/synthetic" "$out" \
        --camera "$camera" --scenes 100 130 160 --frames 2 --seed 0 \
        --dataset-info "$w/dataset.json" \
        --dump gt="$out/dumps/gt" --dump gt_tied="$out/dumps/gt_tied" \
        --dump random="$out/dumps/random" --dump shifted="$out/dumps/shifted" \
        --dump edge="$out/dumps/edge"
}

golden_set tests/data/eval_golden realsense "[$common, \"--cameras\", \"realsense\"]"
golden_set tests/data/eval_golden/curved_realsense realsense \
    "[$common, \"--cameras\", \"realsense\", $curved]"
golden_set tests/data/eval_golden/curved_kinect kinect \
    "[$common, \"--cameras\", \"kinect\", $curved]"
