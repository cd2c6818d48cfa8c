"""The synthetic writers write the same bytes on every machine: the dataset written with other
OpenBLAS kernels (``OPENBLAS_CORETYPE``), and as on a CPU without AVX2 and FMA (numpy's
dispatched SIMD paths off with ``NPY_DISABLE_CPU_FEATURES``, glibc's libm FMA variants off with
``GLIBC_TUNABLES``) is byte-identical, file by file, to the one written here by default.

Before the writers computed in :mod:`mmgrasp.geometry.portable`, the Prescott and Sandybridge
kernels changed the camera poses (``camera_poses.npy``, ``cam0_wrt_table.npy``, meta poses, the
GC6D JSON poses). numpy picks SVML for its float64 transcendental functions only on AVX-512
CPUs, which this test cannot switch on where the CPU lacks them; the writers call none."""
import json
import os
import subprocess
import sys

import pytest
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

from _synthetic_digest import write_and_digest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
#: numpy's run-time dispatched SIMD targets this CPU has (X86_V3, X86_V4, ... or AVX2, ...).
SIMD_FOUND = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
MACHINES = {
    'OpenBLAS Prescott kernel': {'OPENBLAS_CORETYPE': 'Prescott'},
    'a CPU without AVX2 and FMA (OpenBLAS Sandybridge kernel, numpy and libm without them)': {
        'OPENBLAS_CORETYPE': 'Sandybridge', 'NPY_DISABLE_CPU_FEATURES': ' '.join(SIMD_FOUND),
        'GLIBC_TUNABLES': 'glibc.cpu.hwcaps=-AVX2,-FMA'},
}


@pytest.mark.slow
def test_every_file_is_byte_identical_on_other_kernels_and_simd_paths(tmp_path):
    runs = {machine: subprocess.Popen(  # side by side with this one: each mostly imports torch
        [sys.executable, os.path.join(HERE, '_synthetic_digest.py'),
         str(tmp_path / env['OPENBLAS_CORETYPE'])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **env,
             'PYTHONPATH': os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')])})
        for machine, env in MACHINES.items()}
    expected = write_and_digest(str(tmp_path / 'default'))
    assert len(expected) > 100, sorted(expected)
    for machine, run in runs.items():
        stdout, stderr = run.communicate(timeout=900)
        assert run.returncode == 0, stderr[-3000:]
        got = json.loads(stdout)
        assert got.keys() == expected.keys(), machine
        changed = sorted(k for k in expected if got[k] != expected[k])
        assert not changed, f'{machine}: {len(changed)} files differ, e.g. {changed[:8]}'
