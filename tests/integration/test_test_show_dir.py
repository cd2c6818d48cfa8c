"""tools/test.py --show-dir: one PNG per frame of the run, its top grasps after NMS drawn on the
frame's RGB image (the demo's drawing); a missing dump is named."""
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from mmgrasp.apis.dump_pictures import write_dump_pictures
from mmgrasp.datasets.graspnet_reader import GraspNetReader

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_show_dir_draws_every_frame(small_gsnet_files, synthetic_root, tmp_path):
    config, checkpoint = small_gsnet_files
    show, dump = tmp_path / 'show', tmp_path / 'dump'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    out = subprocess.run([sys.executable, 'tools/test.py', config, checkpoint, '--dump-only',
                          '--dump', str(dump), '--work-dir', str(tmp_path / 'work'),
                          '--show-dir', str(show), '--show-top-k', '5'], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    reader = GraspNetReader(synthetic_root, 'realsense')
    expected = {f'scene_{s:04d}_{f:04d}.png' for s in (0, 1) for f in range(3)}
    assert set(os.listdir(show)) == expected and f'drew 6 frames in {show}' in out.stdout
    for s in (0, 1):
        for f in range(3):
            png = cv2.imread(str(show / f'scene_{s:04d}_{f:04d}.png'))
            rgb = cv2.imread(reader.frame_path(s, 'rgb', f))
            assert png.shape[0] == rgb.shape[0] and png.shape[1] > rgb.shape[1]  # the strip
            png = png[:, :rgb.shape[1]]
            assert np.abs(png.astype(int) - rgb).max(axis=2).astype(bool).mean() > 0.005
    # --show-top-k is used: one grasp draws another picture than five
    again = tmp_path / 'one'
    assert write_dump_pictures(reader, [(0, 0)], str(dump), str(again), top_k=1) == 1
    assert not np.array_equal(cv2.imread(str(again / 'scene_0000_0000.png')),
                              cv2.imread(str(show / 'scene_0000_0000.png')))


def test_show_dir_names_a_missing_dump(synthetic_root, tmp_path):
    reader = GraspNetReader(synthetic_root, 'realsense')
    with pytest.raises(FileNotFoundError, match=r'scene_0001/realsense/0002.npy: no dump of '
                                                r'scene 1 frame 2'):
        write_dump_pictures(reader, [(1, 2)], str(tmp_path), str(tmp_path / 'show'))
