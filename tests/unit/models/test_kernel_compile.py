"""Every Triton kernel of mmgrasp compiles for sm_80, sm_89 and sm_90 without spilling, as its
wrappers launch it (``LAUNCHES`` next to the launch sites), and none goes without an entry.

The interpreter (``TRITON_INTERPRET=1``, which other tests set) compiles nothing, so the
compilation runs in a subprocess without it: tools/analysis/kernel_resources.py, whose table
docs/notes/benchmarks/gpu_cost.md quotes."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # compiles every kernel for three targets

# not imported here: importing triton in this process, at collection, would make
# test_point_kernels.py (collected later) find it imported for the GPU and skip its interpreter runs
if importlib.util.find_spec('triton') is None:
    pytest.skip('triton is not installed', allow_module_level=True)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope='module')
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp('kernels') / 'report.json'
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['TRITON_CACHE_DIR'] = str(out.parent / 'cache')  # compile afresh, never a cached result
    run = subprocess.run([sys.executable, 'tools/analysis/kernel_resources.py', '--json',
                          str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    print(run.stdout)
    return json.loads(out.read_text())


def test_every_kernel_has_a_launch_entry(compiled):
    assert compiled['uncovered'] == []
    names = {row['kernel'] for row in compiled['rows']}
    assert {'_fps_kernel', '_ball_query_kernel', '_cylinder_query_kernel',
            '_three_nn_kernel', '_knn_kernel', '_normals_kernel'} <= names


def test_every_launch_compiles_for_each_target_without_spills(compiled):
    rows = compiled['rows']
    assert {row['target'] for row in rows} == {'sm_80', 'sm_89', 'sm_90'}
    errors = [f'{r["kernel"]} ({r["variant"]}) {r["target"]}: {r["error"]}'
              for r in rows if 'error' in r]
    assert not errors, '\n'.join(errors)
    spills = [r for r in rows if r['n_spills'] or r['stack_bytes']]
    assert not spills, spills
    for row in rows:
        assert 0 < row['n_regs'] <= 255 and row['shared'] < 48 * 1024, row


def test_a_kernel_without_entry_and_a_broken_kernel_are_reported(tmp_path):
    """The checks above can fail: a module with an unlaunched kernel and one whose launch
    fails to compile (a loop-carried variable changing type, as FPS's copy-back loop did); a
    helper of a helper of a launched kernel is covered."""
    script = tmp_path / 'probe.py'
    script.write_text('''
import sys, types
sys.path.insert(0, sys.argv[1])
import triton, triton.language as tl
from tools.analysis import kernel_resources as kr
from mmgrasp.ops.point_kernels import Launch

@triton.jit
def _inner(x):
    return x + 1

@triton.jit
def _outer(x):
    return _inner(x)

@triton.jit
def _broken(out_ptr, n, BLOCK: tl.constexpr):
    j = 0
    for start in range(0, n, BLOCK):
        j = start + tl.arange(0, BLOCK)
    tl.store(out_ptr, _outer(j))

@triton.jit
def _orphan(out_ptr):
    tl.store(out_ptr, 1)

launch = Launch(_broken, dict(out_ptr='*i32', n='i32'), dict(BLOCK=64), {})
print(kr.uncovered([_broken, _outer, _inner, _orphan], (launch, )))
row = kr.compile_entry(launch, 90)
print('ERROR' if 'Loop-carried variable' in row.get('error', '') else 'COMPILED', row)
''')
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env['TRITON_CACHE_DIR'] = str(tmp_path / 'cache')
    run = subprocess.run([sys.executable, str(script), str(ROOT)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    listed, compiled = run.stdout.splitlines()
    assert listed == "['_orphan']"
    assert compiled.startswith('ERROR'), compiled
