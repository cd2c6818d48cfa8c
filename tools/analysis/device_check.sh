#!/usr/bin/env bash
# The GPU path, run for real, in one go (well under ten minutes on one H200):
#
#   tools/analysis/device_check.sh [--cpu-smoke] [RESULTS]     run the check
#   tools/analysis/device_check.sh --fetch-wheels              (here, once) wheels into .whl/
#
# Steps, each a section of the results file (default $OUT/device_check.md, else
# work_dirs/device_check/device_check.md):
#   1. install: on a bare GPU machine, the wheels carried in .whl/ (mmengine, mmcv-lite and
#      their pure-Python needs) go to a private site folder when mmengine is missing;
#   2. every test marked `cuda` (pytest -m cuda): with CUDA present none may skip. They include
#      the identity tests on CUDA (dense against deferred MatchedLabels of every recipe, one
#      training step of every demo model under torch.use_deterministic_algorithms) and the
#      sparse U-Net's spconv backend against its torch backend (forward and gradients). The one
#      allowed skip: the spconv tests, where spconv's CUDA wheel (spconv-cu12x, 70 MB: more
#      than .whl/ can carry) is not installed; the results say so;
#   3. a short training of each demo config with --amp (float16 AmpOptimWrapper on CUDA,
#      bfloat16 CPUAmpOptimWrapper on the CPU): every logged loss finite; in the smoke run,
#      MMGRASP_DEVICE_CHECK_AMP_RUNS=DIR reports finished runs in DIR/<config>/ instead of
#      training (the test suite passes its own test_amp_training runs);
#   4. furthest-point sampling alone at paper size (B=4, 20 000 points, 1 024 samples);
#   5. tools/analysis/benchmark_loader.py for GSNet, dense against deferred, on a synthetic
#      paper-size dataset (real 300x12x4 grid, 1280x720, 2 000 label points per object)
#      written on the machine: the per-part table of an iteration;
#   6. tools/analysis/benchmark_dispatch.py for the three recipes (the GSNet demo config in
#      the smoke run) on the demo dataset: kernel launches and host syncs per part on the CUDA
#      path and the torch reference, and on a GPU the profiler's real CUDA kernel count and
#      per-part times (the step fails where that count exceeds the prediction by more than
#      20 %: mmgrasp.analysis.dispatch_count.kernel_excess); on a GPU with spconv's CUDA
#      wheel, GSNet's CUDA path once more with model.backbone.backend=spconv (spconv's
#      kernels are no aten:: ops: only the CUDA kernel column counts them).
#
# Without CUDA (or with --cpu-smoke, or MMGRASP_DEVICE_CHECK=cpu-smoke) the same steps run at
# small sizes and the CUDA tests are expected to skip: tests/integration/test_device_check.py
# runs it so. The exit status is 0 only if every step passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PY=${PYTHON:-python3}
WHEELS="mmengine==0.10.7 mmcv-lite==2.2.0 addict==2.4.0 yapf==0.43.0 termcolor==3.3.0 platformdirs==4.14.9"

if [ "${1:-}" = "--fetch-wheels" ]; then  # where pip reaches PyPI; the device machine cannot
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
    # shellcheck disable=SC2086
    exec "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $WHEELS
fi

SMOKE=${MMGRASP_DEVICE_CHECK:-}
if [ "${1:-}" = "--cpu-smoke" ]; then SMOKE=cpu-smoke; shift; fi
RESULTS=${1:-${OUT:-work_dirs/device_check}/device_check.md}
mkdir -p "$(dirname "$RESULTS")"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mmgrasp_device_check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export MMGRASP_CACHE=$WORK/cache PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
FAILED=()

section() { printf '\n## %s\n\n' "$1" >> "$RESULTS"; echo "[device_check] $1" >&2; }
verdict() {  # verdict NAME STATUS
    echo >> "$RESULTS"
    if [ "$2" -eq 0 ]; then echo "**passed**" >> "$RESULTS"; else
        echo "**FAILED** (exit status $2)" >> "$RESULTS"; FAILED+=("$1"); fi
}
fenced() { { echo '```'; tail -n "${2:-40}" "$1"; echo '```'; } >> "$RESULTS"; }

# ------------------------------------------------------------------------------ 1. install
if ! "$PY" -c 'import mmengine, mmcv' 2>/dev/null; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
        echo "mmengine is missing and no wheels are in .whl/ (run $0 --fetch-wheels where pip" \
             "works, and carry .whl)" >&2
        exit 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$WORK/site" .whl/*.whl || exit 2
    export PYTHONPATH=$PYTHONPATH:$WORK/site
fi
if [ -z "$SMOKE" ] && ! "$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
    SMOKE=cpu-smoke  # no GPU here: the CPU run of the same steps
fi
if [ -n "$SMOKE" ]; then
    export CUDA_VISIBLE_DEVICES=''  # the CPU path even on a GPU machine
fi
{
    echo "# Device check ($([ -n "$SMOKE" ] && echo 'CPU smoke run, small sizes' || echo 'GPU'))"
    echo
    "$PY" - <<'EOF'
import platform, torch, mmengine
device = torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device'
print(f'{device}; Python {platform.python_version()}, torch {torch.__version__}, '
      f'mmengine {mmengine.__version__}, CUDA {torch.version.cuda}; '
      f'{__import__("os").cpu_count()} CPUs')
EOF
} > "$RESULTS"

# --------------------------------------------------------------------------- 2. CUDA tests
section 'CUDA tests (pytest -m cuda)'
# one process (-p no:xdist, the ini's "-n 2" dropped): the device machine may lack pytest-xdist,
# and -s shows the CUDA tests' prints only without it
timeout 420 "$PY" -m pytest -m cuda -q -rs -s -p no:cacheprovider -p no:xdist -o addopts= \
    --junitxml "$WORK/cuda.xml" \
    > "$WORK/cuda.log" 2>&1
status=$?
[ "$status" -eq 5 ] && status=0  # exit 5: nothing selected; the junit check below decides
"$PY" - "$WORK/cuda.xml" "${SMOKE:-gpu}" >> "$RESULTS" <<'EOF' || status=1
import sys
import xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter('testcase'))
smoke = sys.argv[2] != 'gpu'
NO_CUDA_SPCONV = 'spconv-cu12x not installed'  # test_sparse_unet_spconv_cuda.py's skip reason
rows, counts, no_spconv = [], dict(passed=0, failed=0, skipped=0), 0
for case in cases:
    outcome = 'failed' if case.find('failure') is not None or case.find('error') is not None \
        else 'skipped' if case.find('skipped') is not None else 'passed'
    counts[outcome] += 1
    if outcome == 'skipped' and NO_CUDA_SPCONV in case.find('skipped').get('message', ''):
        no_spconv += 1
        outcome = f'skipped: {NO_CUDA_SPCONV}'
    rows.append(f"| {case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')} | {outcome} |")
print(f"{len(cases)} tests: {counts['passed']} passed, {counts['failed']} failed, "
      f"{counts['skipped']} skipped\n")
if no_spconv and not smoke:
    print(f'**The spconv backend is untested here**: {no_spconv} spconv tests skipped, '
          f'{NO_CUDA_SPCONV} on this machine.\n')
print('| test | outcome |\n|---|---|')
print('\n'.join(rows))
print()
ok = len(cases) > 0 and counts['failed'] == 0 and (counts['skipped'] == len(cases) if smoke
                                                    else counts['skipped'] == no_spconv)
if not ok:
    print('expected: ' + ('every CUDA test skipped (no GPU)' if smoke else
                          'every CUDA test run and passed (none skipped)'))
sys.exit(0 if ok else 1)
EOF
grep -A8 'without a deterministic CUDA implementation' "$WORK/cuda.log" | sort -u \
    > "$WORK/nondeterministic.txt" || true
if [ -s "$WORK/nondeterministic.txt" ]; then
    echo 'Warned under use_deterministic_algorithms (warn_only):' >> "$RESULTS"
    fenced "$WORK/nondeterministic.txt" 20
fi
[ "$status" -ne 0 ] && fenced "$WORK/cuda.log" 60
verdict 'CUDA tests' "$status"

# ---------------------------------------------------------------------------- datasets
if [ -n "$SMOKE" ]; then
    DEMO=(--scenes 1 --frames 2 --objects 4 --points-per-object 120 --image-size 320 180)
    PAPER=("${DEMO[@]}")
    POINTS=800
else
    DEMO=(--scenes 4 --frames 4 --objects 10 --points-per-object 300)  # tools/run_demo.sh's
    PAPER=(--scenes 1 --frames 8 --objects 10 --points-per-object 2000)
    POINTS=
fi
make_data() {  # make_data FOLDER ARGS...
    local out=$1; shift
    "$PY" tools/data/make_synthetic.py "$out" "$@" --cameras realsense --quiet \
        && "$PY" tools/data/generate_graspness.py "$out" > /dev/null
}
make_data "$WORK/demo" "${DEMO[@]}" 2> "$WORK/demo_data.log" || { fenced "$WORK/demo_data.log"; FAILED+=('demo dataset'); }

# ---------------------------------------------------------------------- 3. AMP trainings
section 'Demo trainings with --amp'
echo '| config | wrapper | iterations logged | losses (first → last logged) | finite |' >> "$RESULTS"
echo '|---|---|---|---|---|' >> "$RESULTS"
amp_status=0
AMP_RUNS=
if [ -n "$SMOKE" ] && [ -n "${MMGRASP_DEVICE_CHECK_AMP_RUNS:-}" ]; then
    AMP_RUNS=$MMGRASP_DEVICE_CHECK_AMP_RUNS  # the test suite's runs: not trained again here
    echo "Runs reused from \`MMGRASP_DEVICE_CHECK_AMP_RUNS\` (the test suite's" \
         'tests/integration/test_amp_training.py runs), not trained again:' >> "$RESULTS"
    echo >> "$RESULTS"
fi
for config in gsnet_demo graspnet_baseline_demo scale_balanced_demo; do
    if [ -n "$AMP_RUNS" ]; then
        work=$AMP_RUNS/$config
        cat "$work"/*/*.log > "$WORK/amp_$config.log" 2>&1
        run=$?
    else
        work=$WORK/amp_$config
        options=(train_cfg.max_epochs=1 train_dataloader.dataset.data_root="$WORK/demo"
                 default_hooks.logger.interval=1 default_hooks.checkpoint.interval=100)
        if [ -n "$SMOKE" ]; then
            options+=(train_dataloader.num_workers=0 train_dataloader.persistent_workers=False
                      train_dataloader.dataset.pipeline.0.num_points=$POINTS)
        fi
        timeout 300 "$PY" tools/train.py "configs/$config.py" --amp --work-dir "$work" \
            --cfg-options "${options[@]}" > "$WORK/amp_$config.log" 2>&1
        run=$?
    fi
    "$PY" - "$work" "$config" "$run" >> "$RESULTS" <<'EOF' || { amp_status=1; fenced "$WORK/amp_$config.log" 30; }
import glob, json, math, re, sys
work, config, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(line) for path in glob.glob(f'{work}/*/vis_data/scalars.json')
        for line in open(path) if line.strip()]
logs = ''.join(open(p).read() for p in glob.glob(f'{work}/*/*.log'))
wrapper = (re.findall(r"type='(\w*AmpOptimWrapper)'", logs) or ['?'])[0]
losses = [row['loss'] for row in rows if 'loss' in row]
finite = bool(rows) and all(math.isfinite(v) for row in rows for k, v in row.items()
                            if k.startswith('loss'))
shown = f'{losses[0]:.4g} → {losses[-1]:.4g}' if losses else '-'
print(f'| {config} | {wrapper} | {len(rows)} | {shown} | {"yes" if finite else "NO"} |')
sys.exit(0 if run == 0 and finite and wrapper != '?' else 1)
EOF
done
verdict 'AMP trainings' "$amp_status"

# ---------------------------------------------------------------- 4. furthest-point sampling
section 'Furthest-point sampling alone'
"$PY" - "${SMOKE:-gpu}" >> "$RESULTS" 2> "$WORK/fps.log" <<'EOF'
import sys, time, torch
from mmgrasp.ops import furthest_point_sample
device = 'cpu' if sys.argv[1] != 'gpu' else 'cuda'
batch, n, num = (2, 2000, 256) if device == 'cpu' else (4, 20000, 1024)
xyz = torch.rand(batch, n, 3, generator=torch.Generator().manual_seed(0)).to(device)
furthest_point_sample(xyz, num)  # warm-up
times = []
for _ in range(3 if device == 'cpu' else 10):
    if device == 'cuda':
        torch.cuda.synchronize()
    start = time.perf_counter()
    furthest_point_sample(xyz, num)
    if device == 'cuda':
        torch.cuda.synchronize()
    times.append(time.perf_counter() - start)
print(f'| device | B | N | samples | best (ms) | median (ms) |\n|---|---|---|---|---|---|\n'
      f'| {device} | {batch} | {n} | {num} | {min(times) * 1e3:.3g} | '
      f'{sorted(times)[len(times) // 2] * 1e3:.3g} |')
EOF
status=$?
[ "$status" -ne 0 ] && fenced "$WORK/fps.log"
verdict 'FPS' "$status"

# ------------------------------------------------------------ 5. loader benchmark (GSNet)
section 'benchmark_loader.py, GSNet, dense against deferred'
if [ -n "$SMOKE" ]; then
    DATA=$WORK/demo
    BENCH=(configs/gsnet_demo.py --iterations 1 --warmup 0 --repeats 1 --workers 0
           --model-scale 0.25 --cfg-options train_dataloader.dataset.data_root="$DATA"
           train_dataloader.dataset.pipeline.0.num_points=$POINTS)
    status=0
else
    DATA=$WORK/paper
    start=$(date +%s)
    make_data "$DATA" "${PAPER[@]}" 2> "$WORK/paper_data.log"
    status=$?
    echo "Dataset: make_synthetic.py ${PAPER[*]} --cameras realsense (written in" \
         "$(( $(date +%s) - start )) s, graspness included)." >> "$RESULTS"
    BENCH=(configs/gsnet_deferred.py --iterations 8 --warmup 2 --repeats 2 --workers 6
           --cfg-options train_dataloader.dataset.data_root="$DATA")
fi
if [ "$status" -eq 0 ]; then
    echo >> "$RESULTS"
    echo "\`benchmark_loader.py ${BENCH[*]}\`" | sed "s|$WORK|\$WORK|g" >> "$RESULTS"
    echo >> "$RESULTS"
    timeout 420 "$PY" tools/analysis/benchmark_loader.py "${BENCH[@]}" --json "$WORK/bench.json" \
        > "$WORK/bench.out" 2> "$WORK/bench.log"
    status=$?
    cat "$WORK/bench.out" >> "$RESULTS"
    [ "$status" -ne 0 ] && fenced "$WORK/bench.log"
else
    fenced "$WORK/paper_data.log"
fi
verdict 'loader benchmark' "$status"

# ------------------------------------------------------ 6. kernel launches and host syncs
section 'benchmark_dispatch.py: kernel launches and host syncs per part'
echo '| config | path | train launches / syncs | inference launches / syncs | CUDA kernels (train) | iteration (s) |' >> "$RESULTS"
echo '|---|---|---|---|---|---|' >> "$RESULTS"
dispatch_status=0
if [ -n "$SMOKE" ]; then  # a shared CPU: the reference path's Python loops may take minutes
    DISPATCH=(gsnet_demo)
    DISPATCH_OPTIONS=(train_dataloader.dataset.pipeline.0.num_points=$POINTS)
    DISPATCH_TIMEOUT=600
else
    DISPATCH_TIMEOUT=300
    DISPATCH=(gsnet_deferred graspnet_baseline_deferred scale_balanced_deferred)
    DISPATCH_OPTIONS=()
fi
for config in "${DISPATCH[@]}"; do
    timeout "$DISPATCH_TIMEOUT" "$PY" tools/analysis/benchmark_dispatch.py "configs/$config.py" \
        --data-root "$WORK/demo" --json "$WORK/dispatch_$config.json" \
        ${DISPATCH_OPTIONS[@]+--cfg-options "${DISPATCH_OPTIONS[@]}"} \
        > "$WORK/dispatch_$config.out" 2> "$WORK/dispatch_$config.log"
    run=$?
    "$PY" - "$WORK/dispatch_$config.json" "$config" "$run" >> "$RESULTS" <<'EOF' || { dispatch_status=1; fenced "$WORK/dispatch_$config.log" 30; }
import json, sys
from mmgrasp.analysis.dispatch_count import kernel_excess
path, config, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
if run != 0:
    sys.exit(1)
results = json.load(open(path))
for name, result in results.items():
    train, infer = result['train'], result['inference']
    print(f"| {config} | {name} ({result['device']}) | {train['launches']} / {train['syncs']} | "
          f"{infer['launches']} / {infer['syncs']} | {train.get('kernels', '-')} | "
          f"{train['seconds']:.3g} |")
excess = kernel_excess(results)  # the profiler's kernels > the counter's prediction + 20 %
for line in excess:
    print(f'\n**{config}: more device work than counted**: {line}')
sys.exit(1 if excess else 0)
EOF
    if [ "$run" -eq 0 ]; then
        { echo; echo "\`$config\` (launches / syncs):"; echo
          sed -n '/^| part/,/total/p' "$WORK/dispatch_$config.out"; } >> "$RESULTS"
    fi
done
if [ -z "$SMOKE" ]; then  # the spconv backend's CUDA path (spconv's CPU wheel cannot train)
    if "$PY" -c 'import sys; from spconv.cppconstants import CPU_ONLY_BUILD as cpu; sys.exit(cpu)' \
            2> /dev/null; then  # spconv's CUDA wheel
        timeout 300 "$PY" tools/analysis/benchmark_dispatch.py configs/gsnet_deferred.py \
            --data-root "$WORK/demo" --json "$WORK/dispatch_spconv.json" --paths cuda_path \
            --cfg-options model.backbone.backend=spconv \
            > "$WORK/dispatch_spconv.out" 2> "$WORK/dispatch_spconv.log"
        run=$?
        { echo; echo '`gsnet_deferred` with `model.backbone.backend=spconv`, CUDA path' \
               '(launches / syncs):'; echo; } >> "$RESULTS"
        if [ "$run" -eq 0 ]; then
            sed -n '/^| part/,/total/p' "$WORK/dispatch_spconv.out" >> "$RESULTS"
            grep 'training iteration' "$WORK/dispatch_spconv.out" >> "$RESULTS"
        else
            dispatch_status=1
            fenced "$WORK/dispatch_spconv.log" 30
        fi
    else
        { echo; echo 'GSNet with backend=spconv not run: spconv-cu12x not installed here.'; } \
            >> "$RESULTS"
    fi
fi
verdict 'launch counter' "$dispatch_status"

# ---------------------------------------------------------------------------------- verdict
section 'Verdict'
if [ ${#FAILED[@]} -eq 0 ]; then
    echo 'every step passed' >> "$RESULTS"
else
    echo "failed: ${FAILED[*]}" >> "$RESULTS"
fi
echo "[device_check] results in $RESULTS" >&2
[ ${#FAILED[@]} -eq 0 ]
