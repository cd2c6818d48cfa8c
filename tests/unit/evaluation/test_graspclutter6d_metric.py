"""GraspClutter6DMetric: dumps named by scene, camera and image id, the camera checked, figures
and the protocol written to JSON."""
import json
import os

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader
from mmgrasp.evaluation.metrics import GraspClutter6DMetric


def _grasps(reader, scene, frame, n=30, seed=0):
    """Rows at model points of the frame's instances (some land on objects)."""
    rng = np.random.default_rng(seed)
    ids, poses = reader.instances(scene, frame)
    rows = np.zeros((n, 17), np.float32)
    pick = rng.integers(0, len(ids), n)
    rows[:, 0] = rng.random(n)
    rows[:, 1], rows[:, 2], rows[:, 3] = 0.05, 0.02, 0.02
    rows[:, 4:13] = np.eye(3).reshape(9)
    rows[:, 13:16] = poses[pick, :3, 3] + rng.normal(scale=0.01, size=(n, 3))
    rows[:, 16] = ids[pick] + 1
    return torch.from_numpy(rows)


def test_metric_dumps_and_evaluates_the_test_scene(gc6d_root, tmp_path):
    reader = GraspClutter6DReader(gc6d_root, 'kinect')
    metric = GraspClutter6DMetric(gc6d_root, camera='kinect', dump_dir=str(tmp_path))
    assert metric.camera == 'azure-kinect'
    samples = [dict(scene=3, frame=f, camera='azure-kinect', pred_grasps=_grasps(reader, 3, f))
               for f in range(3)]
    metric.process(None, samples)
    assert sorted(os.listdir(tmp_path / '000003' / 'azure-kinect')) == \
        ['000003.npy', '000007.npy', '000011.npy']  # 4 * annotation + 3
    figures = metric.compute_metrics(metric.results)
    assert set(figures) == {'AP', 'AP0.4', 'AP0.8', 'frames'} and figures['frames'] == 13
    with open(tmp_path / 'graspclutter6d_azure-kinect.json') as f:
        payload = json.load(f)
    assert payload['test_split'] is True and payload['protocol']['max width'] == '0.14 m'
    with pytest.raises(ValueError, match="got a frame of camera 'zivid'"):
        metric.process(None, [dict(samples[0], camera='zivid')])
