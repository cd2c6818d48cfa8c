"""mmgrasp-eval on a GraspClutter6D root: any of its cameras, the frames asked for, labelled
as tools/test.py labels them, figures equal to the evaluator's over those frames."""
import json

import numpy as np
import pytest
import torch

from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader
from mmgrasp.evaluation import graspclutter6d_dump_eval as gc6d
from mmgrasp.evaluation.cli import main
from mmgrasp.evaluation.metrics.graspclutter6d_metric import write_gc6d_dump


def _dump(root, dump, camera):
    reader = GraspClutter6DReader(root, camera)
    for frame in range(reader.num_frames(3)):
        ids, poses = reader.instances(3, frame)
        rows = np.zeros((len(ids), 17), np.float32)
        rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = 0.9, 0.05, 0.02, 0.02
        rows[:, 4:13] = np.eye(3).reshape(9)
        rows[:, 13:16] = poses[:, :3, 3]
        rows[:, 16] = ids + 1
        write_gc6d_dump(dump, dict(scene=3, frame=frame, camera=reader.camera,
                                   pred_grasps=torch.from_numpy(rows)))
    return reader


@pytest.mark.parametrize('frames', [None, [0, 2]])
def test_a_gc6d_dump_folder_is_evaluated_for_its_camera(gc6d_root, tmp_path, capsys, frames):
    dump, out = str(tmp_path / 'dump'), str(tmp_path / 'figures.json')
    _dump(gc6d_root, dump, 'zivid')
    args = [gc6d_root, dump, '--camera', 'zivid', '--split', 'test', '--json', out,
            '--no-progress'] + (['--frames', *map(str, frames)] if frames else [])
    figures = main(args)
    run = frames or [0, 1, 2]
    accuracy = gc6d.evaluate_dump(gc6d_root, dump, 'zivid', [3])[3][run]
    assert figures == dict(gc6d.summarize({3: accuracy}), empty_frames=0)
    assert figures['frames'] == len(run)
    with open(out) as f:
        payload = json.load(f)
    assert payload['settings']['camera'] == 'zivid' and payload['test_split'] is False
    label = f'sampled: {len(run)} of 13 frames, not comparable with published AP'
    assert payload['coverage']['label'] == label
    assert f'**{label}**' in capsys.readouterr().out


def test_gc6d_refuses_what_it_cannot_do(gc6d_root, tmp_path):
    with pytest.raises(SystemExit, match='--scale-ap / --diagnose'):
        main([gc6d_root, str(tmp_path), '--camera', 'zivid', '--split', 'test', '--scale-ap'])
    with pytest.raises(SystemExit, match=r'scene_camera\.json: annotations \[5\] have no zivid'):
        main([gc6d_root, str(tmp_path), '--camera', 'zivid', '--split', 'test', '--frames', '5'])
    with pytest.raises(SystemExit, match='camera='):
        main([gc6d_root, str(tmp_path), '--camera', 'kinect2', '--split', 'test'])
