"""The dataset's workspace outside the Python API: demo/grasp_demo.py --data-root/--scene/--frame
applies it itself (the grasps GraspInferencer gives with segmentation= and camera_to_table=),
and tools/data/write_workspace_mask.py writes it as the PNG that --mask reads."""
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from mmgrasp.apis import GraspInferencer
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.frames.store import masked_pixels
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRITE_MASK = os.path.join(REPO, 'tools', 'data', 'write_workspace_mask.py')
demo = script_module('demo/grasp_demo.py')
mask_tool = script_module('tools/data/write_workspace_mask.py')


def expected_mask(root: str, scene: int, frame: int, outlier: float = 0.02) -> np.ndarray:
    """masked_pixels (the dataset's loader rule) as an image, written out here by hand."""
    reader = GraspNetReader(root, 'realsense')
    depth = reader.load_depth(scene, frame)
    meta = reader.load_meta(scene, frame)
    pixels = masked_pixels(depth, reader.load_segmentation(scene, frame), meta.intrinsics,
                           meta.factor_depth, reader.trajectory(scene).camera_to_table(frame)
                           .astype(np.float64), outlier)
    mask = np.zeros(depth.size, bool)
    mask[pixels] = True
    return mask.reshape(depth.shape)


def write_mask(*args: str) -> subprocess.CompletedProcess:
    """The tool as a script (its command line and exit status); the other calls run its
    main() in this process, which is what the script runs."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, WRITE_MASK, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.slow
def test_write_workspace_mask_writes_the_loaders_mask(synthetic_root, small_gsnet_files,
                                                      tmp_path):
    out = str(tmp_path / 'ws.png')
    run = write_mask(synthetic_root, '--scene', '1', '--frame', '2', '--out', out)
    assert run.returncode == 0, run.stderr
    png = cv2.imread(out, cv2.IMREAD_UNCHANGED)
    expected = expected_mask(synthetic_root, 1, 2)
    assert png.dtype == np.uint8 and set(np.unique(png)) == {0, 255}
    np.testing.assert_array_equal(png > 0, expected)
    assert f'{int(expected.sum())} of {expected.size} pixels' in run.stdout
    # the workspace is a real cut: fewer pixels than the readings, more than the objects
    depth = GraspNetReader(synthetic_root, 'realsense').load_depth(1, 2)
    seg = GraspNetReader(synthetic_root, 'realsense').load_segmentation(1, 2)
    assert (seg > 0).sum() < expected.sum() < (depth > 0).sum()
    # the margin matters, from the option or from a config's LoadGraspScene
    wide = str(tmp_path / 'wide.png')
    assert mask_tool.main([synthetic_root, '--scene', '1', '--frame', '2', '--outlier', '0.1',
                           '--out', wide]) == 0
    np.testing.assert_array_equal(cv2.imread(wide, cv2.IMREAD_UNCHANGED) > 0,
                                  expected_mask(synthetic_root, 1, 2, 0.1))
    assert (cv2.imread(wide, cv2.IMREAD_UNCHANGED) > 0).sum() > expected.sum()
    config = tmp_path / 'margin.py'
    config.write_text(f"_base_ = ['{small_gsnet_files[0]}']\n"
                      "test_dataloader = dict(dataset=dict(pipeline=[\n"
                      "    dict(type='LoadGraspScene', num_points=1200, outlier=0.1),\n"
                      "    dict(type='PackGraspInputs', keys=('points', ))]))\n")
    from_config = str(tmp_path / 'from_config.png')
    assert mask_tool.main([synthetic_root, '--scene', '1', '--frame', '2', '--config',
                           str(config), '--out', from_config]) == 0
    np.testing.assert_array_equal(cv2.imread(from_config, cv2.IMREAD_UNCHANGED),
                                  cv2.imread(wide, cv2.IMREAD_UNCHANGED))


def test_write_workspace_mask_names_bad_input(synthetic_root, tmp_path):
    out = str(tmp_path / 'ws.png')
    with pytest.raises(SystemExit, match=r'frame 9 out of range: scene 0 \(realsense\) has 3 '
                       'frames'):
        mask_tool.main([synthetic_root, '--scene', '0', '--frame', '9', '--out', out])
    with pytest.raises(SystemExit, match='no scenes/ folder'):
        mask_tool.main([str(tmp_path), '--scene', '0', '--frame', '0', '--out', out])
    assert not os.listdir(tmp_path)  # nothing half-written


@pytest.mark.slow
def test_grasp_demo_applies_the_datasets_workspace_to_a_frame(synthetic_root, small_gsnet_files,
                                                              tmp_path):
    config, checkpoint = small_gsnet_files
    out, saved = str(tmp_path / 'frame.png'), str(tmp_path / 'frame.npy')
    assert demo.main(['--data-root', synthetic_root, '--scene', '0', '--frame', '1', '--config',
                      config, '--checkpoint', checkpoint, '--out', out,
                      '--save-grasps', saved]) == 0
    reader = GraspNetReader(synthetic_root, 'realsense')
    meta = reader.load_meta(0, 1)
    inferencer = GraspInferencer(config, checkpoint)

    def expected(frame_id):
        return inferencer(reader.load_depth(0, 1), meta.intrinsics, meta.factor_depth,
                          segmentation=reader.load_segmentation(0, 1),
                          camera_to_table=reader.trajectory(0).camera_to_table(0 + 1),
                          frame_id=frame_id)
    # a dataset frame draws its points by its id, as the test dataset does
    assert len(expected((0, 'realsense', 1))) > 0
    np.testing.assert_array_equal(np.load(saved), expected((0, 'realsense', 1)))
    # the picture is drawn on the frame's RGB image, its legends in a strip to the right
    height, width = reader.load_depth(0, 1).shape
    picture = cv2.imread(out).shape[:2]
    assert picture[0] == height and picture[1] > width, (picture, (height, width))
    # the same through the PNG the tool writes, given to --mask
    mask_png = str(tmp_path / 'ws.png')
    assert mask_tool.main([synthetic_root, '--scene', '0', '--frame', '1', '--out',
                           mask_png]) == 0
    via_png = str(tmp_path / 'via_png.npy')
    assert demo.main([reader.frame_path(0, 'depth', 1), '--meta', reader.frame_path(0, 'meta', 1),
                      '--mask', mask_png, '--config', config, '--checkpoint', checkpoint,
                      '--out', str(tmp_path / 'via_png.png'), '--save-grasps', via_png]) == 0
    np.testing.assert_array_equal(np.load(via_png), expected(None))  # an image: no id


def test_grasp_demo_dataset_frame_refuses_mixed_input(synthetic_root, small_gsnet_files,
                                                      tmp_path):
    config, checkpoint = small_gsnet_files
    common = ['--config', config, '--checkpoint', checkpoint, '--out', str(tmp_path / 'x.png')]
    with pytest.raises(SystemExit, match='needs --data-root, --scene and --frame'):
        demo.main(['--scene', '0', '--frame', '0', *common])
    with pytest.raises(SystemExit, match='drop DEPTH.png, --mask'):
        demo.main(['depth.png', '--mask', 'm.png', '--data-root', synthetic_root, '--scene', '0',
                   '--frame', '0', *common])
    with pytest.raises(SystemExit, match='give DEPTH.png with --intrinsics'):
        demo.main(common)
    with pytest.raises(SystemExit, match='frame 7 out of range'):
        demo.main(['--data-root', synthetic_root, '--scene', '0', '--frame', '7', *common])
    assert not os.listdir(tmp_path)
