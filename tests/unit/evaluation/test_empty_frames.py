"""Frames with an empty dump are counted, named and explained (GraspNetMetric, the table, the
JSON), never silently scored 0."""
import json
import os
import warnings

import numpy as np
import torch

from mmgrasp.evaluation.empty_frames import (DUMP_HINT, dump_rows, empty_dump_frames,
                                             empty_frame_figures, empty_frames_message,
                                             empty_frames_record, model_cause)
from mmgrasp.evaluation.metrics import GraspNetMetric
from mmgrasp.evaluation.report import results_table
from eval_data import top_down_grasp, write_dump, write_eval_dataset

SETTINGS = {'camera': 'realsense', 'collision threshold': '0.01 (voxel 0.01 m)',
            'objectness filter': 'on'}


def test_empty_dump_frames_reads_only_sizes(tmp_path):
    dump = str(tmp_path)
    write_dump(dump, 100, 0, [])
    write_dump(dump, 100, 2, [top_down_grasp(0.9, np.array([0, 0, 0.5]))])
    write_dump(dump, 130, 5, [])
    path = os.path.join(dump, 'scene_0100', 'realsense', '0001.npy')
    np.save(path, np.zeros((0, ), np.float32))  # a flat empty array: load_dump reads 0 rows
    frames = {100: [0, 1, 2, 3], 130: [5]}  # frame 3 has no file: the evaluation names it
    assert empty_dump_frames(dump, 'realsense', frames) == {100: [0, 1], 130: [5]}
    assert empty_dump_frames(dump, 'kinect', frames) == {}
    assert [dump_rows(os.path.join(dump, 'scene_0100', 'realsense', f'000{f}.npy'))
            for f in (0, 1, 2)] == [0, 0, 1]


def test_counts_per_split_record_and_message():
    empty = {100: [1, 2], 130: [0]}
    figures = empty_frame_figures(empty, [100, 101, 130])
    assert figures == {'empty_frames': 3, 'seen/empty_frames': 2, 'similar/empty_frames': 1}
    # scenes not evaluated are not counted; splits not touched get no key
    assert empty_frame_figures(empty, [101]) == {'empty_frames': 0, 'seen/empty_frames': 0}
    record = empty_frames_record(empty, 12)
    assert record == dict(count=3, frames=12, frame_ids={'100': [1, 2], '130': [0]},
                          details='scene 100: 1-2; scene 130: 0')
    message = empty_frames_message(record, 'mmgrasp-eval')
    assert message == ('mmgrasp-eval: 3 of 12 frames have no grasp in the dump (scene 100: '
                       f'1-2; scene 130: 0); each scores AP 0. {DUMP_HINT}')
    assert empty_frames_message(empty_frames_record({}, 12), 'x') == ''
    assert empty_frames_message(record, 'x', 'Cause.').endswith('each scores AP 0. Cause.')


def test_model_cause_names_the_filter_that_emptied_the_frames():
    both = model_cause(2, 1, SETTINGS)
    assert 'in 2 the model decoded no grasp (no seed had P(object) > 0.5, so the objectness ' \
           'filter kept none)' in both
    assert 'in 1 the collision filter (threshold 0.01 (voxel 0.01 m)) removed every grasp' in both
    assert 'untrained' in both
    off = model_cause(1, 0, dict(SETTINGS, **{'objectness filter': 'n/a (all seeds, GSNet)'}))
    assert 'its filters kept no seed' in off and 'objectness' not in off
    assert 'collision' not in model_cause(1, 0, SETTINGS)
    assert 'decoded' not in model_cause(0, 1, SETTINGS)
    assert model_cause(0, 0, SETTINGS) == DUMP_HINT


def test_table_labels_empty_frames_only_when_there_are_some():
    figures = {'AP': 0.0, 'AP0.8': 0.0, 'AP0.4': 0.0, 'frames': 12, 'seen/AP': 0.0,
               'seen/AP0.8': 0.0, 'seen/AP0.4': 0.0, 'seen/frames': 12}
    plain = results_table(figures, SETTINGS)
    assert results_table(dict(figures, empty_frames=0), SETTINGS) == plain
    assert 'grasp' not in plain
    labelled = results_table(dict(figures, empty_frames=12), SETTINGS)
    assert labelled.startswith('**12 of 12 frames have no grasp in the dump, each scoring AP 0**')
    assert '| frames without grasps | 12 of 12 |' in labelled.splitlines()
    assert set(plain.splitlines()) < set(labelled.splitlines())  # the rest is unchanged


def test_metric_counts_names_and_explains_empty_frames(tmp_path):
    """Frame 0 has grasps; the model decoded none for frame 1; the collision filter removed all
    five of frame 2's. The figures, the JSON and one warning say so."""
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=3)
    metric = GraspNetMetric(data_root=root, camera='realsense', dump_dir=dump, progress=False,
                            settings=SETTINGS)
    none = torch.zeros((0, 17))
    metric.process({}, [
        dict(scene=100, frame=0, camera='realsense', grasps_before_collision=3,
             pred_grasps=torch.tensor(np.array([top_down_grasp(0.9, centres[0])]))),
        dict(scene=100, frame=1, camera='realsense', pred_grasps=none),  # filter off: no key
        dict(scene=100, frame=2, camera='realsense', grasps_before_collision=5,
             pred_grasps=none)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        figures = metric.evaluate(3)  # the dataset size: mmengine keeps that many results
    (message, ) = [str(w.message) for w in caught if 'no grasp' in str(w.message)]
    assert message.startswith('GraspNetMetric: 2 of 3 frames have no grasp in the dump '
                              '(scene 100: 1-2); each scores AP 0. Of these frames, in 1 the '
                              'model decoded no grasp (no seed had P(object) > 0.5')
    assert 'in 1 the collision filter (threshold 0.01' in message
    assert figures['graspnet/empty_frames'] == 2 and figures['graspnet/seen/empty_frames'] == 2
    assert figures['graspnet/frames'] == 3 and figures['graspnet/AP'] > 0
    with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
        payload = json.load(f)
    assert payload['empty_frames'] == dict(count=2, frames=3, frame_ids={'100': [1, 2]},
                                           details='scene 100: 1-2')
    assert payload['figures']['empty_frames'] == 2
    # frames dumped before, given by their ids alone: counted from the files, cause unknown
    again = GraspNetMetric(data_root=root, camera='realsense', dump_dir=dump, progress=False,
                           settings=SETTINGS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        figures = again.compute_metrics([(100, f) for f in range(3)])
    (message, ) = [str(w.message) for w in caught if 'no grasp' in str(w.message)]
    assert message.endswith(f'(scene 100: 1-2); each scores AP 0. {DUMP_HINT}')
    assert figures['empty_frames'] == 2


def test_metric_without_empty_frames_says_nothing(tmp_path):
    root, dump = str(tmp_path / 'data'), str(tmp_path / 'dump')
    centres = write_eval_dataset(root, scene=100, frames=1)
    metric = GraspNetMetric(data_root=root, camera='realsense', dump_dir=dump, progress=False)
    metric.process({}, [dict(scene=100, frame=0, camera='realsense', pred_grasps=torch.tensor(
        np.array([top_down_grasp(0.9, centres[0])])))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        figures = metric.evaluate(1)
    assert not [w for w in caught if 'no grasp' in str(w.message)]
    assert figures['graspnet/empty_frames'] == 0
    with open(os.path.join(dump, 'graspnet_realsense.json')) as f:
        assert json.load(f)['empty_frames']['count'] == 0

