"""model.test_cfg: the reference test scripts' collision filter on predicted grasps."""
import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from mmgrasp.analysis import dispatch_count as dispatch
from mmgrasp.models.detectors.base import GraspDetector
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.apis import register_all_modules


def grasp(t):
    rot = np.eye(3)
    return np.concatenate([[0.9, 0.04, 0.02, 0.02], rot.reshape(-1), t, [-1]]).astype(np.float32)


def make(test_cfg=None):
    register_all_modules(False)
    return GraspDetector(test_cfg=test_cfg)


def samples(cloud=None):
    s = GraspDataSample(metainfo={} if cloud is None else dict(masked_cloud=cloud))
    s.pred_grasps = torch.from_numpy(np.stack([grasp([0, 0, 0]), grasp([0.5, 0, 0])]))
    s.pred_objectness = torch.tensor([0.7, 0.8])
    return [s]


# a wall of points through the first grasp's right finger (y = 0.025), none near the second
WALL = np.array([[x, 0.025, z] for x in np.arange(-0.04, 0.02, 0.005)
                 for z in np.arange(-0.008, 0.009, 0.004)], np.float32)


def test_collision_filter_drops_colliding_grasps():
    out = make(dict(collision_thresh=0.01)).filter_collisions({}, samples(WALL))
    assert out[0].pred_grasps[:, 13].tolist() == [0.5]
    assert out[0].pred_objectness.tolist() == pytest.approx([0.8])
    # what the evaluation tells an emptied frame from one the model decoded nothing for by
    assert out[0].grasps_before_collision == 2
    assert 'grasps_before_collision' not in make().filter_collisions({}, samples(WALL))[0]


def test_threshold_zero_keeps_everything_and_input_cloud_option():
    assert len(make().filter_collisions({}, samples(WALL))[0].pred_grasps) == 2
    model = make(dict(collision_thresh=0.01, collision_cloud='input'))
    out = model.filter_collisions({'points': torch.from_numpy(WALL)[None]}, samples())
    assert len(out[0].pred_grasps) == 1
    # a threshold above the wall's share keeps the grasp
    loose = make(dict(collision_thresh=0.9)).filter_collisions({}, samples(WALL))
    assert len(loose[0].pred_grasps) == 2


def test_bad_test_cfg_and_missing_cloud_are_named():
    with pytest.raises(ValueError, match='unknown test_cfg keys'):
        make(dict(collision_threshold=0.01))
    with pytest.raises(ValueError, match='collision_cloud'):
        make(dict(collision_cloud='raw'))
    with pytest.raises(KeyError, match='with_masked_cloud=True'):
        make(dict(collision_thresh=0.01)).filter_collisions({}, samples())


def test_filter_reads_the_batch_once_whatever_its_size():
    """Two host reads for a batch of frames (the grasps, the input clouds), and each frame
    keeps its own non-colliding grasps: the wall cuts the first grasp of frames 0 and 2."""
    far = WALL + np.float32(5)
    points = torch.from_numpy(np.stack([WALL, far, WALL]))
    model = make(dict(collision_thresh=0.01, collision_cloud='input'))
    batch = [samples()[0] for _ in range(3)]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out = model.filter_collisions({'points': points}, batch)
    assert sum(p['syncs'] for p in dispatch.count_events(prof.events()).values()) == 2
    assert [o.pred_grasps[:, 13].tolist() for o in out] == [[0.5], [0, 0.5], [0.5]]
    assert [o.pred_objectness.tolist() for o in out] == [pytest.approx([0.8]),
                                                           pytest.approx([0.7, 0.8]),
                                                           pytest.approx([0.8])]
