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
    assert set(figures) == {'AP', 'AP0.4', 'AP0.8', 'frames', 'empty_frames'}
    assert figures['frames'] == 3 and figures['empty_frames'] == 0
    with open(tmp_path / 'graspclutter6d_azure-kinect.json') as f:
        payload = json.load(f)
    assert payload['protocol']['max width'] == '0.14 m'
    # the session data holds 3 of scene 3's 13 annotated images: a sample, labelled so
    assert payload['test_split'] is False and payload['coverage']['label'] == \
        'sampled: 3 of 13 frames, not comparable with published AP'
    assert payload['coverage']['details'] == 'scene 3: annotations 0-2'
    with pytest.raises(ValueError, match="got a frame of camera 'zivid'"):
        metric.process(None, [dict(samples[0], camera='zivid')])


def test_a_sample_is_scored_on_the_frames_run_only(gc6d_root, tmp_path):
    """``--frames 0 2``: the AP is that of frames 0 and 2 (not 13 with zeros for the others),
    labelled sampled; a dump another run left in the folder is not evaluated."""
    from mmgrasp.evaluation import graspclutter6d_dump_eval as gc6d
    reader = GraspClutter6DReader(gc6d_root, 'kinect')
    metric = GraspClutter6DMetric(gc6d_root, camera='kinect', dump_dir=str(tmp_path))
    stale = dict(scene=3, frame=1, camera='azure-kinect', pred_grasps=_grasps(reader, 3, 1))
    metric.process(None, [stale])  # an earlier run's dump of frame 1
    metric.results.clear()
    metric.process(None, [dict(scene=3, frame=f, camera='azure-kinect',
                               pred_grasps=_grasps(reader, 3, f)) for f in (0, 2)])
    figures = metric.compute_metrics(metric.results)
    accuracy = gc6d.evaluate_dump(gc6d_root, str(tmp_path), 'kinect', [3])[3]
    assert figures['frames'] == 2  # not 13 (zeros for the rest), not 3 (the stale dump)
    assert figures['AP'] == pytest.approx(100.0 * accuracy[[0, 2]].mean())
    with open(tmp_path / 'graspclutter6d_azure-kinect.json') as f:
        coverage = json.load(f)['coverage']
    assert coverage['label'] == 'sampled: 2 of 13 frames, not comparable with published AP'
    assert coverage['details'] == 'scene 3: annotations 0, 2'


def test_frames_with_an_empty_dump_are_counted_and_explained(gc6d_root, tmp_path):
    metric = GraspClutter6DMetric(gc6d_root, camera='kinect', dump_dir=str(tmp_path),
                                  settings={'collision threshold': '0.01'})
    reader = GraspClutter6DReader(gc6d_root, 'kinect')
    metric.process(None, [
        dict(scene=3, frame=0, camera='azure-kinect', pred_grasps=_grasps(reader, 3, 0)),
        dict(scene=3, frame=1, camera='azure-kinect', pred_grasps=torch.zeros((0, 17)),
             grasps_before_collision=4)])
    with pytest.warns(UserWarning, match=r'GraspClutter6DMetric: 1 of 2 frames have no grasp '
                      r'in the dump \(scene 3: 1\); each scores AP 0\. Of these frames, in 1 '
                      r'the collision filter \(threshold 0\.01\) removed every grasp'):
        figures = metric.compute_metrics(metric.results)
    assert figures['empty_frames'] == 1 and figures['frames'] == 2
    with open(tmp_path / 'graspclutter6d_azure-kinect.json') as f:
        assert json.load(f)['empty_frames']['frame_ids'] == {'3': [1]}


def test_coverage_of_a_whole_test_split_is_complete():
    from mmgrasp.evaluation.graspclutter6d_dump_eval import coverage as gc6d_coverage
    whole = gc6d_coverage({3: list(range(13)), 5: list(range(13))}, [3, 5])
    assert whole['complete'] and whole['label'] == '' and whole['official_frames'] == 26
    part = gc6d_coverage({3: list(range(13))}, [3, 5])
    assert not part['complete'] and part['label'].startswith('sampled: 13 of 26 frames')
    assert part['details'].endswith('test scenes not run: 5')


def test_missing_dumps_scores_every_annotation_as_graspclutter6dapi(gc6d_root, tmp_path):
    """missing_dumps='zero': all 13 annotations of the test scene from the dump folder, the
    absent ones 0 (eval_all's figures, the frames the API would average over); 'error' names
    the first absent file; None scores the frames run only."""
    from mmgrasp.evaluation import graspclutter6d_dump_eval as gc6d
    reader = GraspClutter6DReader(gc6d_root, 'kinect')
    samples = []
    for f in range(3):  # a grasp at each instance's origin (what scores in test_cli_gc6d)
        ids, poses = reader.instances(3, f)
        rows = np.zeros((len(ids), 17), np.float32)
        rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = 0.9, 0.05, 0.02, 0.02
        rows[:, 4:13] = np.eye(3).reshape(9)
        rows[:, 13:16], rows[:, 16] = poses[:, :3, 3], ids + 1
        samples.append(dict(scene=3, frame=f, camera='azure-kinect',
                            pred_grasps=torch.from_numpy(rows)))
    figures = {}
    for rule in (None, 'zero', 'error'):
        metric = GraspClutter6DMetric(gc6d_root, camera='kinect', missing_dumps=rule,
                                      dump_dir=str(tmp_path / str(rule)))
        metric.process(None, samples)
        if rule == 'error':
            with pytest.raises(FileNotFoundError, match=r'000003/azure-kinect/000015\.npy: no '
                               r'dump for this frame \(10 of 13 frames have none'):
                metric.compute_metrics(metric.results)
            continue
        figures[rule] = metric.compute_metrics(metric.results)
        with open(tmp_path / str(rule) / 'graspclutter6d_azure-kinect.json') as f:
            payload = json.load(f)
        assert payload['test_split'] is (rule == 'zero')
        assert (payload['missing_dumps'] or {}).get('count') == (10 if rule else None)
    assert figures[None]['frames'] == 3 and figures['zero']['frames'] == 13
    assert figures[None]['empty_frames'] == figures['zero']['empty_frames'] == 0
    three = gc6d.evaluate_dump(gc6d_root, str(tmp_path / 'None'), 'kinect', [3])[3]
    assert three.shape == (3, 50, 6)
    assert figures[None]['AP'] == pytest.approx(100.0 * three.mean())
    # eval_all's figures: the golden-tested scene evaluation over all 13 annotations
    api = gc6d.summarize(gc6d.evaluate_dump(gc6d_root, str(tmp_path / 'zero'), 'kinect', [3],
                                            missing_dumps='zero'))
    assert {k: figures['zero'][k] for k in api} == api
    assert figures['zero']['AP'] == pytest.approx(100.0 * three.sum() / (13 * three[0].size))
    with pytest.raises(ValueError, match="missing_dumps='zeros'"):
        GraspClutter6DMetric(gc6d_root, camera='kinect', missing_dumps='zeros')
