"""demo/grasp_demo.py and tools/analysis/browse_dataset.py write PNGs of the expected size, with
the grippers drawn where the grasps are and the label points where the labels are."""
import importlib.util
import os

import cv2
import numpy as np
import pytest

from mmgrasp.apis.grasp_drawing import (GRIPPER_COLOUR, depth_colours, draw_scene,
                                        gripper_boxes, project)
from mmgrasp.storage.frame_store import masked_pixels
from mmgrasp.datasets.graspnet_reader import GraspNetReader

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path: str):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


demo = _load(os.path.join(REPO, 'demo', 'grasp_demo.py'))
browse = _load(os.path.join(REPO, 'tools', 'analysis', 'browse_dataset.py'))


@pytest.fixture(scope='module')
def frame_files(synthetic_root, small_gsnet_files, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('pictures')
    config, checkpoint = small_gsnet_files
    reader = GraspNetReader(synthetic_root, 'realsense')
    depth = reader.load_depth(0, 0)
    meta = reader.load_meta(0, 0)
    pixels = masked_pixels(depth, reader.load_segmentation(0, 0), meta.intrinsics,
                           meta.factor_depth, reader.trajectory(0).camera_to_table(0)
                           .astype(np.float64))
    mask = np.zeros(depth.size, np.uint8)
    mask[pixels] = 255
    files = dict(config=config, checkpoint=checkpoint, K=str(tmp / 'K.npy'),
                 mask=str(tmp / 'mask.png'), intrinsics=meta.intrinsics, shape=depth.shape,
                 depth=reader.frame_path(0, 'depth', 0), rgb=reader.frame_path(0, 'rgb', 0))
    np.save(files['K'], meta.intrinsics)
    cv2.imwrite(files['mask'], mask.reshape(depth.shape))
    return files


def _gripper_pixels(image: np.ndarray) -> np.ndarray:
    red = np.round(np.array(GRIPPER_COLOUR) * 255)
    return (np.abs(image[..., :3].astype(float) - red).max(axis=-1) < 30)


@pytest.mark.parametrize('rgb', [False, True])
def test_grasp_demo_draws_grippers_at_the_grasps(frame_files, tmp_path, rgb):
    out, saved = str(tmp_path / 'grasps.png'), str(tmp_path / 'grasps.npy')
    args = [frame_files['depth'], '--intrinsics', frame_files['K'], '--config',
            frame_files['config'], '--checkpoint', frame_files['checkpoint'], '--mask',
            frame_files['mask'], '--out', out, '--top-k', '5', '--save-grasps', saved]
    assert demo.main(args + (['--rgb', frame_files['rgb']] if rgb else [])) == 0
    image = cv2.cvtColor(cv2.imread(out, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert image.shape[:2] == frame_files['shape'] and os.path.getsize(out) > 1000
    grasps = np.load(saved)
    assert len(grasps) > 1
    drawn = grasps[np.argsort(-grasps[:, 0], kind='stable')[:5]]
    gripper = _gripper_pixels(image)
    # every drawn gripper but the best (yellow) has red pixels where its boxes project
    for boxes in gripper_boxes(drawn[1:]):
        uv = np.round(project(boxes.reshape(-1, 3), frame_files['intrinsics'])).astype(int)
        u0, v0 = np.clip(uv.min(axis=0), 0, None)
        u1, v1 = uv.max(axis=0) + 1
        assert gripper[v0:v1, u0:u1].any()
    # and nowhere far from all grasps
    far = np.ones_like(gripper)
    for boxes in gripper_boxes(drawn):
        uv = project(boxes.reshape(-1, 3), frame_files['intrinsics'])
        u0, v0 = np.floor(uv.min(axis=0)).astype(int) - 2
        u1, v1 = np.ceil(uv.max(axis=0)).astype(int) + 3
        far[max(v0, 0):max(v1, 0), max(u0, 0):max(u1, 0)] = False
    assert not (gripper & far).any()


def test_browse_dataset_draws_label_points(frame_files, tmp_path, synthetic_root):
    for colour in ('graspness', 'mu'):
        out_dir = str(tmp_path / colour)
        assert browse.main([frame_files['config'], '--output-dir', out_dir, '--num', '2',
                            '--colour', colour]) == 0
        names = sorted(os.listdir(out_dir))
        assert names == ['scene_0000_0000.png', 'scene_0000_0001.png']
        image = cv2.imread(os.path.join(out_dir, names[0]), cv2.IMREAD_COLOR)
        assert image.shape[:2] == frame_files['shape']
        plain = tmp_path / f'plain_{colour}.png'
        reader = GraspNetReader(synthetic_root, 'realsense')
        draw_scene(depth_colours(reader.load_depth(0, 0)), str(plain))
        changed = np.abs(image.astype(int) - cv2.imread(str(plain)).astype(int)).max(-1) > 40
        seg = reader.load_segmentation(0, 0) > 0
        # graspness: the sampled cloud everywhere; mu: label points on the objects only
        assert changed.any()
        if colour == 'mu':
            grown = cv2.dilate(seg.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
            body = changed[25:, :-30]  # away from the title and the colour bar
            assert body.sum() > 100
            assert (body & grown[25:, :-30]).sum() > 0.95 * body.sum()
