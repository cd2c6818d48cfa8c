"""GraspInferencer on a synthetic frame gives what tools/test.py dumps for it; bad input named."""
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch

from mmgrasp.apis import GraspInferencer
from mmgrasp.storage.frames.store import masked_pixels
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.evaluation.functional import grasp_nms
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope='module')
def setup(small_gsnet_files, tmp_path_factory):
    """A small config, an initialised checkpoint and tools/test.py's dump with them."""
    tmp = tmp_path_factory.mktemp('inferencer')
    config, checkpoint = small_gsnet_files
    dump = str(tmp / 'dump')
    out = subprocess.run([sys.executable, 'tools/test.py', config, checkpoint, '--dump-only',
                          '--dump', dump, '--work-dir', str(tmp / 'work')], cwd=REPO,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, 'PYTHONPATH': os.pathsep.join(  # this checkout's
                             [REPO, os.environ.get('PYTHONPATH', '')])})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return config, checkpoint, dump


def frame(root: str, scene: int, index: int):
    reader = GraspNetReader(root, 'realsense')
    depth = reader.load_depth(scene, index)
    meta = reader.load_meta(scene, index)
    pixels = masked_pixels(depth, reader.load_segmentation(scene, index), meta.intrinsics,
                           meta.factor_depth, reader.trajectory(scene).camera_to_table(index)
                           .astype(np.float64))
    mask = np.zeros(depth.size, dtype=bool)
    mask[pixels] = True
    return depth, meta.intrinsics, meta.factor_depth, mask.reshape(depth.shape)


def test_inferencer_equals_the_test_tool_dump(setup, synthetic_root, tmp_path):
    config, checkpoint, dump = setup
    expected = np.load(os.path.join(dump, 'scene_0000', 'realsense', '0000.npy'))
    assert 0 < len(expected) < 32  # 32 seeds, some removed by the collision filter
    depth, k, factor, mask = frame(synthetic_root, 0, 0)

    raw = GraspInferencer(config, checkpoint, nms=False)(depth, k, factor, mask,
                                                         frame_id=(0, 'realsense', 0))
    assert raw.dtype == np.float32 and raw.shape == expected.shape
    np.testing.assert_array_equal(raw, expected)

    inferencer = GraspInferencer(config, checkpoint)
    png = str(tmp_path / 'depth.png')
    cv2.imwrite(png, depth)
    grasps = inferencer(png, k, factor, mask, frame_id=(0, 'realsense', 0))
    np.testing.assert_array_equal(grasps, grasp_nms(expected).astype(np.float32))
    assert (np.diff(grasps[:, 0]) <= 0).all()
    # the workspace matters: every reading samples more of the image
    assert not np.array_equal(inferencer(depth, k, factor, depth > 0,
                                         frame_id=(0, 'realsense', 0)), grasps)


def test_inferencer_equals_the_dump_on_every_frame(setup, synthetic_root):
    """Every frame of the run, given alone or in a batch in any order, with its id: exactly
    tools/test.py's dump (the draws are keyed by the frame, not by its place in the run)."""
    config, checkpoint, dump = setup
    reader = GraspNetReader(synthetic_root, 'realsense')
    ids = [(s, f) for s in (0, 1) for f in range(reader.num_frames(s))]
    frames = {key: frame(synthetic_root, *key) for key in ids}
    expected = {(s, f): np.load(os.path.join(dump, f'scene_{s:04d}', 'realsense', f'{f:04d}.npy'))
                for s, f in ids}
    inferencer = GraspInferencer(config, checkpoint, nms=False, batch_size=4)
    for s, f in ids:
        depth, k, factor, mask = frames[(s, f)]
        np.testing.assert_array_equal(
            inferencer(depth, k, factor, mask, frame_id=(s, 'realsense', f)), expected[(s, f)],
            err_msg=f'scene {s} frame {f}')
    shuffled = ids[::-1]
    batch = inferencer([frames[key][0] for key in shuffled], frames[ids[0]][1],
                       frames[ids[0]][2], [frames[key][3] for key in shuffled],
                       frame_id=[(s, 'realsense', f) for s, f in shuffled])
    for key, grasps in zip(shuffled, batch):  # a batch of 6 sums in another order
        assert grasps.shape == expected[key].shape, key
        np.testing.assert_allclose(grasps, expected[key], atol=1e-5, err_msg=f'batched {key}')
    with pytest.raises(ValueError, match=r'expected \(scene, camera, frame\)'):
        inferencer(*frames[ids[0]], frame_id=(0, 0))


def test_inferencer_applies_the_datasets_workspace_or_refuses(setup, synthetic_root):
    """Given the frame's segmentation and table pose, the inferencer applies the dataset's
    workspace rule itself and gives exactly tools/test.py's grasps; with no workspace at all it
    refuses (it used to keep every reading: another cloud than the dataset's)."""
    config, checkpoint, dump = setup
    expected = np.load(os.path.join(dump, 'scene_0000', 'realsense', '0000.npy'))
    reader = GraspNetReader(synthetic_root, 'realsense')
    depth, k, factor, _ = frame(synthetic_root, 0, 0)
    inferencer = GraspInferencer(config, checkpoint, nms=False)
    grasps = inferencer(depth, k, factor, segmentation=reader.load_segmentation(0, 0),
                        camera_to_table=reader.trajectory(0).camera_to_table(0),
                        frame_id=(0, 'realsense', 0))
    np.testing.assert_array_equal(grasps, expected)
    with pytest.raises(ValueError, match="needs a workspace: segmentation= and "
                                         "camera_to_table= .the dataset's rule"):
        inferencer(depth, k, factor)
    with pytest.raises(ValueError, match='needs both segmentation and camera_to_table'):
        inferencer(depth, k, factor, segmentation=reader.load_segmentation(0, 0))


def test_inferencer_bounds_the_depth_and_names_a_wrong_scale(setup):
    """Readings beyond max_depth are dropped with a warning (an all-65535 image used to take
    105 s a frame in the collision filter); none left: the depth range seen and the likely
    cause are named."""
    config, checkpoint, _ = setup
    inferencer = GraspInferencer(config, checkpoint)
    k = np.array([[60.0, 0, 25], [0, 60, 20], [0, 0, 1]])
    saturated = np.full((40, 50), 65535, np.uint16)
    with pytest.raises(ValueError, match=r'2000 of 2000 readings in the workspace lie beyond '
                                         r'max_depth 3 m \(depth seen 65.535..65.535 m at '
                                         r'factor_depth 1000\): no point left. Check '
                                         r'factor_depth'):
        inferencer(saturated, k, mask=saturated > 0)
    half = np.full((40, 50), 600, np.uint16)
    half[:, 25:] = 65535
    with pytest.warns(UserWarning, match='1000 of 2000 readings .* beyond max_depth 3 m'):
        inferencer(half, k, mask=half > 0)
    with pytest.raises(ValueError, match=r'factor_depth 1\)'):  # millimetres read as metres
        inferencer(np.full((40, 50), 600, np.uint16), k, factor_depth=1,
                   mask=np.ones((40, 50), bool))


def test_inferencer_batches_frames(setup, synthetic_root):
    config, checkpoint, _ = setup
    depth0, k, factor, mask0 = frame(synthetic_root, 0, 0)
    depth1, _, _, mask1 = frame(synthetic_root, 0, 1)
    one = GraspInferencer(config, checkpoint, nms=False)
    singles = [one(depth0, k, factor, mask0), one([depth1], k, factor, [mask1])[0]]
    batched = GraspInferencer(config, checkpoint, nms=False, batch_size=2)(
        [depth0, depth1], k, factor, [mask0, mask1])
    assert len(batched) == 2 and batched[1].shape[1] == 17 and len(batched[1]) > 0
    # an image without an id draws from its content: the same alone, second in a call or in a
    # batch (atol: a batch of two sums in another order)
    for got, alone in zip(batched, singles):
        np.testing.assert_allclose(got, alone, atol=1e-5)
    assert not np.array_equal(singles[0], one(depth0, k, factor, mask0,
                                              frame_id=(0, 'realsense', 0)))


def test_inferencer_names_bad_input(setup):
    config, checkpoint, _ = setup
    inferencer = GraspInferencer(config, checkpoint)
    depth = np.full((40, 50), 500, np.uint16)
    k = np.array([[60.0, 0, 25], [0, 60, 20], [0, 0, 1]])
    everything = np.ones(depth.shape, bool)
    with pytest.raises(TypeError, match='uint16'):
        inferencer(depth.astype(np.float32), k)
    with pytest.raises(ValueError, match=r'\(H, W\)'):
        inferencer(depth[..., None], k)
    with pytest.raises(ValueError, match=r'\(3, 3\)'):
        inferencer(depth, k[:2], mask=everything)
    with pytest.raises(ValueError, match='fx, fy > 0'):
        inferencer(depth, k * np.array([[-1], [1], [1]]))
    with pytest.raises(ValueError, match='factor_depth'):
        inferencer(depth, k, factor_depth=0)
    with pytest.raises(ValueError, match='mask'):
        inferencer(depth, k, mask=np.ones((40, 49), bool))
    with pytest.raises(ValueError, match='2 masks for 1 depth'):
        inferencer([depth], k, mask=[None, None])
    with pytest.raises(ValueError, match='no reading'):
        inferencer(np.zeros_like(depth), k, mask=everything)
    with pytest.raises(FileNotFoundError, match='missing.png'):
        inferencer('missing.png', k)
    with pytest.raises(ValueError, match='clip_depth is for RGB-D models'):
        inferencer(depth, k, mask=everything, clip_depth=1.0)


def test_grasp_demo_reproduces_the_dump_of_a_dataset_frame(setup, synthetic_root, tmp_path):
    """demo/grasp_demo.py --scene/--frame draws the frame's points as the test dataset does
    (its frame id) and so writes exactly tools/test.py's grasps for it, after the NMS; output
    folders that do not exist yet are created."""
    demo = script_module('demo/grasp_demo.py')
    config, checkpoint, dump = setup
    saved = str(tmp_path / 'new' / 'folder' / 'grasps.npy')
    threads = torch.get_num_threads()
    assert demo.main(['--data-root', synthetic_root, '--scene', '1', '--frame', '2', '--config',
                      config, '--checkpoint', checkpoint, '--out',
                      str(tmp_path / 'pictures' / 'frame.png'), '--save-grasps', saved]) == 0
    expected = np.load(os.path.join(dump, 'scene_0001', 'realsense', '0002.npy'))
    assert len(expected) > 0
    np.testing.assert_array_equal(np.load(saved), grasp_nms(expected).astype(np.float32))
    assert os.path.isfile(tmp_path / 'pictures' / 'frame.png')
    assert torch.get_num_threads() == threads  # the config's count only while predicting
