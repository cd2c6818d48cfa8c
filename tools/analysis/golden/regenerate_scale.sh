#!/usr/bin/env bash
# Regenerate tests/data/eval_golden_scale/: the dataset of tests/data/eval_golden (same writer
# command), its committed dumps copied, and Scale-Balanced-Grasp's size-split evaluation run with
# graspnetAPI in its own environment (make_scale_golden.py).
#
# Usage (from the repository root):
#   tools/analysis/golden/regenerate_scale.sh GRASPNETAPI_VENV [WORK]
#   GRASPNETAPI_VENV  graspnetAPI's environment (setup_graspnetapi_env.sh)
#   WORK              a scratch folder (default: a new temporary one)
set -euo pipefail
venv=${1:?usage: regenerate_scale.sh GRASPNETAPI_VENV [WORK]}
work=${2:-$(mktemp -d)}
src=tests/data/eval_golden
out=tests/data/eval_golden_scale
args=$(python -c 'import json; print(json.load(open("'$src'/golden.json"))["meta"]["make_synthetic_args"])')
mapfile -t argv < <(python -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$args")
rm -rf "$work/synthetic"
PYTHONPATH=$PWD python tools/data/make_synthetic.py "$work/synthetic" "${argv[@]}" --quiet
rm -rf "$out/dumps"
mkdir -p "$out"
cp -r "$src/dumps" "$out/dumps"
# what the evaluator reads, so the test can tell a changed writer from a changed evaluator
PYTHONPATH=$PWD python - "$work/synthetic" "$out/dataset.json" "$args" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location('d', 'tools/analysis/golden/make_golden_dumps.py')
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
digest = mod.evaluation_inputs_digest(sys.argv[1], 'realsense', [100, 130, 160])
json.dump({'make_synthetic_args': sys.argv[3], 'evaluation_inputs_sha1': digest},
          open(sys.argv[2], 'w'), indent=1)
PY
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$venv/bin/python" tools/analysis/golden/make_scale_golden.py "$work/synthetic" "$out" \
    --camera realsense --scenes 100 130 160 --frames 2 --seed 0 \
    --dump gt="$out/dumps/gt" --dump gt_tied="$out/dumps/gt_tied" --dump random="$out/dumps/random" \
    --dump shifted="$out/dumps/shifted" --dump edge="$out/dumps/edge"
