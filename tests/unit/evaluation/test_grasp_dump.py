"""Dump files: the layout graspnetAPI reads, written under a name of the writing process."""
import os

import numpy as np
import pytest
import torch

from mmgrasp.evaluation.metrics import grasp_dump
from mmgrasp.evaluation.metrics.grasp_dump import write_frame_dump


def _sample(grasps):
    return dict(pred_grasps=torch.from_numpy(grasps), scene=101, frame=7, camera='realsense')


def test_a_frame_dump_holds_the_grasps_at_graspnets_path(tmp_path):
    grasps = np.random.default_rng(0).random((5, 17)).astype(np.float64)
    assert write_frame_dump(str(tmp_path), _sample(grasps)) == 5
    path = tmp_path / 'scene_0101' / 'realsense' / '0007.npy'
    stored = np.load(path)
    assert stored.dtype == np.float32 and np.array_equal(stored, grasps.astype(np.float32))
    assert os.listdir(path.parent) == ['0007.npy']


def test_the_temporary_name_is_this_process_and_a_bad_shape_leaves_nothing(tmp_path, monkeypatch):
    renamed = []
    replace = os.replace
    monkeypatch.setattr(grasp_dump.os, 'replace',
                        lambda src, dst: (renamed.append(src), replace(src, dst)))
    write_frame_dump(str(tmp_path), _sample(np.zeros((2, 17), np.float32)))
    assert renamed and renamed[0].endswith(f'.tmp-{os.getpid()}')
    with pytest.raises(ValueError, match='scene 101 frame 7 has shape'):
        write_frame_dump(str(tmp_path / 'bad'), _sample(np.zeros((2, 16), np.float32)))
    assert not (tmp_path / 'bad').exists()
