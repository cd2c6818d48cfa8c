"""The synthetic GraspClutter6D writer: the layout graspclutter6dAPI reads, four cameras with
their depth scales, one model twice in most scenes, per-instance masks and collision arrays,
deterministic output."""
import hashlib
import json
import os

import cv2
import numpy as np
import pytest

from mmgrasp.datasets.graspclutter6d_reader import CAMERA_INDEX, DEPTH_SCALE
from mmgrasp.datasets.synthetic.gc6d import write_graspclutter6d_dataset
from _scripts import script_module


def _json(root, *parts):
    with open(os.path.join(root, *parts)) as f:
        return json.load(f)


def test_layout_cameras_and_duplicates(gc6d_root):
    assert _json(gc6d_root, 'split_info', 'grasp_train_scene_ids.json') == [1, 2]
    assert _json(gc6d_root, 'split_info', 'grasp_test_scene_ids.json') == [3]
    per_scene = _json(gc6d_root, 'split_info', 'obj_ids_per_scene.json')
    for scene in (1, 2, 3):
        sdir = os.path.join(gc6d_root, 'scenes', f'{scene:06d}')
        gt, cam = _json(sdir, 'scene_gt.json'), _json(sdir, 'scene_camera.json')
        assert sorted(map(int, gt)) == sorted(map(int, cam)) == sorted(
            4 * a + i for a in range(3) for i in CAMERA_INDEX.values())
        ids = [i['obj_id'] for i in gt['1']]
        assert all([i['obj_id'] for i in v] == ids for v in gt.values())
        assert (len(set(ids)) < len(ids)) == (scene < 3)  # a model twice in all but the last
        assert per_scene[str(scene)] == sorted(set(ids))
        with np.load(os.path.join(gc6d_root, 'collision_label', f'{scene:06d}.npz')) as npz:
            assert len(npz.files) == len(ids)
        for image, instances in gt.items():
            camera = next(c for c, i in CAMERA_INDEX.items() if (int(image) - 1) % 4 + 1 == i)
            label = cv2.imread(os.path.join(sdir, 'label', f'{int(image):06d}.png'),
                               cv2.IMREAD_UNCHANGED)
            depth = cv2.imread(os.path.join(sdir, 'depth', f'{int(image):06d}.png'),
                               cv2.IMREAD_UNCHANGED)
            assert label.shape[2] == 3 and depth.dtype == np.uint16
            for n, inst in enumerate(instances):
                name = f'{int(image):06d}_{n:06d}.png'
                visible = cv2.imread(os.path.join(sdir, 'mask_visib', name), cv2.IMREAD_UNCHANGED)
                amodal = cv2.imread(os.path.join(sdir, 'mask', name), cv2.IMREAD_UNCHANGED)
                assert not (visible & ~amodal).any()  # visible part of the amodal mask
                assert (label[visible > 0, 0] == inst['obj_id']).all()
                if visible.any():  # the depth scale is the camera's: z of the box centre
                    z = depth[visible > 0] / DEPTH_SCALE[camera]
                    assert abs(np.median(z) - inst['cam_t_m2c'][2] / 1000.0) < 0.06


def test_label_files_hold_points_offsets_scores(gc6d_root):
    with np.load(os.path.join(gc6d_root, 'grasp_label', 'obj_000001_labels.npz')) as npz:
        assert sorted(npz.files) == ['offsets', 'points', 'scores']
    for name in ('models_m/obj_000001.ply', 'models_obj_m/obj_000001.obj',
                 'models_obj_m/obj_000001.sdf', 'tolerance/obj_000001_tolerance.npy'):
        assert os.path.isfile(os.path.join(gc6d_root, name)), name


def _hashes(root):
    return {os.path.relpath(os.path.join(d, f), root):
            hashlib.sha1(open(os.path.join(d, f), 'rb').read()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def test_output_is_deterministic(tmp_path):
    kwargs = dict(scenes=1, test_scenes=1, frames=1, objects=2, points_per_object=20,
                  grid=(3, 2, 2), image_size=(64, 36), progress=False)
    write_graspclutter6d_dataset(tmp_path / 'a', **kwargs)
    write_graspclutter6d_dataset(tmp_path / 'b', **kwargs)
    assert _hashes(str(tmp_path / 'a')) == _hashes(str(tmp_path / 'b'))
    with pytest.raises(FileExistsError):
        write_graspclutter6d_dataset(tmp_path / 'a', **kwargs)


@pytest.mark.parametrize('bad', [dict(frames=14), dict(objects=1, duplicates=1),
                                 dict(models=201, objects=2), dict(test_scenes=-1)])
def test_bad_arguments(tmp_path, bad):
    with pytest.raises(ValueError):
        write_graspclutter6d_dataset(tmp_path / 'x', **{**dict(progress=False), **bad})


@pytest.mark.slow
def test_make_synthetic_layout_flag(tmp_path):
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    tool = os.path.join(repo, 'tools', 'data', 'make_synthetic.py')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([repo, os.environ.get('PYTHONPATH', '')])}
    small = ['--scenes', '1', '--frames', '1', '--objects', '2', '--points-per-object', '20',
             '--grid', '3', '2', '2', '--image-size', '64', '36', '--quiet']
    out = str(tmp_path / 'gc6d')
    subprocess.run([sys.executable, tool, out, '--layout', 'graspclutter6d', '--test-scenes', '1',
                    '--duplicates', '0', *small], check=True, env=env)
    assert _json(out, 'split_info', 'grasp_test_scene_ids.json') == [2]
    ids = [i['obj_id'] for i in _json(out, 'scenes', '000001', 'scene_gt.json')['1']]
    assert len(set(ids)) == len(ids)  # --duplicates 0: no model twice
    # a refused option: the script's main() in this process (what it runs)
    make_synthetic = script_module('tools/data/make_synthetic.py')
    with pytest.raises(SystemExit, match='make_synthetic: error: .*drop --cameras'):
        make_synthetic.main([str(tmp_path / 'x'), '--layout', 'graspclutter6d', '--cameras',
                             'kinect', *small])
    assert not os.path.exists(tmp_path / 'x')
