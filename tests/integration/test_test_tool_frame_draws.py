"""tools/test.py: a frame's dumped grasps are the same in the full run, a ``--frame-stride`` run
and a ``--frames`` run (test-time draws are keyed by the frame, mmgrasp.utils.random)."""
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _dump(config, checkpoint, tmp_path, name, *extra) -> dict:
    out_dir = str(tmp_path / name)
    out = subprocess.run([sys.executable, 'tools/test.py', config, checkpoint, '--dump-only',
                          '--dump', out_dir, '--work-dir', str(tmp_path / f'work_{name}'),
                          *extra], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, 'PYTHONPATH': os.pathsep.join(
                             [REPO, os.environ.get('PYTHONPATH', '')])})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {os.path.relpath(p, out_dir): np.load(p)
            for p in glob.glob(os.path.join(out_dir, 'scene_*', '*', '*.npy'))}


@pytest.mark.slow
def test_stride_and_frame_runs_dump_the_full_runs_grasps(small_gsnet_files, tmp_path):
    config, checkpoint = small_gsnet_files
    full = _dump(config, checkpoint, tmp_path, 'full')
    assert len(full) == 6 and all(len(g) for g in full.values())
    strided = _dump(config, checkpoint, tmp_path, 'stride', '--frame-stride', '2')
    listed = _dump(config, checkpoint, tmp_path, 'frames', '--frames', '1', '2')
    assert sorted(strided) == sorted(f'scene_{s:04d}/realsense/{f:04d}.npy'
                                     for s in (0, 1) for f in (0, 2))
    assert sorted(listed) == sorted(f'scene_{s:04d}/realsense/{f:04d}.npy'
                                    for s in (0, 1) for f in (1, 2))
    for run in (strided, listed):
        for name, grasps in run.items():
            np.testing.assert_array_equal(grasps, full[name], err_msg=name)
