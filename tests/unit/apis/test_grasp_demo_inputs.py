"""demo/grasp_demo.py as a newcomer meets it: input that cannot be a depth image, a camera
matrix or a workspace mask is refused with one line naming the file, what is wrong and the fix
(each case built here as graspnet-baseline's example frame would be mistaken); the config is
checked as tools/train.py checks it, in the demo and in GraspInferencer."""
import os

import cv2
import numpy as np
import pytest
import scipy.io
from mmengine.config import Config

from mmgrasp.apis import GraspInferencer
from _scripts import script_module

K = np.array([[300.0, 0, 40], [0, 300, 30], [0, 0, 1]])
demo = script_module('demo/grasp_demo.py')


@pytest.fixture
def frame(tmp_path):
    """A 60 × 80 millimetre depth PNG (a box 0.5 m away), its camera matrix, a mask, an RGB."""
    depth = np.full((60, 80), 700, np.uint16)
    depth[20:40, 30:50] = 500
    mask = np.zeros(depth.shape, np.uint8)
    mask[10:50, 20:60] = 255
    rgb = np.random.default_rng(0).integers(0, 255, depth.shape + (3, ), np.uint8)
    paths = dict(depth=str(tmp_path / 'depth.png'), k=str(tmp_path / 'K.npy'),
                 mask=str(tmp_path / 'mask.png'), rgb=str(tmp_path / 'color.png'))
    cv2.imwrite(paths['depth'], depth)
    np.save(paths['k'], K)
    cv2.imwrite(paths['mask'], mask)
    cv2.imwrite(paths['rgb'], rgb)
    return paths, depth


def _run(small_gsnet_files, tmp_path, depth, *extra):
    config, checkpoint = small_gsnet_files
    return demo.main([depth, '--config', config, '--checkpoint', checkpoint,
                      '--out', str(tmp_path / 'out.png'), *extra])


def test_a_colour_image_is_not_a_mask(frame, small_gsnet_files, tmp_path):
    paths, _ = frame
    with pytest.raises(SystemExit, match=rf"{paths['rgb']}: a colour image is not a workspace "
                                         r"mask: give a single-channel PNG"):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', paths['k'], '--mask',
             paths['rgb'])
    grey = str(tmp_path / 'grey.png')
    cv2.imwrite(grey, cv2.cvtColor(cv2.imread(paths['rgb']), cv2.COLOR_BGR2GRAY))
    with pytest.raises(SystemExit, match=rf'{grey}: \d+ distinct values, but a workspace mask '
                                         r'holds two'):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', paths['k'], '--mask',
             grey)
    with pytest.raises(SystemExit, match='--clip-depth is for RGB-D models; a depth model '
                                         'takes a workspace: --mask'):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', paths['k'], '--mask',
             paths['mask'], '--clip-depth', '1.0')
    # the same mask saved with three equal channels is a mask
    three = str(tmp_path / 'mask3.png')
    cv2.imwrite(three, np.repeat(cv2.imread(paths['mask'], cv2.IMREAD_UNCHANGED)[..., None], 3, 2))
    np.testing.assert_array_equal(demo.read_mask(three, (60, 80)),
                                  demo.read_mask(paths['mask'], (60, 80)))


@pytest.mark.parametrize('case, message', [
    ('metres.npy', r'float32 values 0\.5\.\.0\.7, metres by the look of them: save '
                   r'\(d \* 1000\)\.astype\(np\.uint16\) and use factor_depth 1000'),
    ('metres.tiff', r'float32 values 0\.5\.\.0\.7, metres by the look of them'),
    ('millimetres.npy', r'float64 values 500\.\.700: save them as raw units, '
                        r'np\.round\(d\)\.astype\(np\.uint16\)'),
    ('eight_bit.png', r'uint8 values: an 8-bit image \(a depth visualisation\?\), not raw depth'),
    ('color.png', r'uint8 values: a colour image, not raw depth'),
    ('not_an_image.png', r'cannot decode it as an image'),
])
def test_depth_that_is_not_raw_uint16_is_named_with_the_fix(frame, small_gsnet_files, tmp_path,
                                                            case, message):
    paths, depth = frame
    path = str(tmp_path / case)
    if case == 'metres.npy':
        np.save(path, depth.astype(np.float32) / 1000)
    elif case == 'metres.tiff':
        cv2.imwrite(path, depth.astype(np.float32) / 1000)
    elif case == 'millimetres.npy':
        np.save(path, depth.astype(np.float64))
    elif case == 'eight_bit.png':
        cv2.imwrite(path, (depth // 4).astype(np.uint8))
    elif case == 'color.png':
        path = paths['rgb']
    else:
        with open(path, 'w') as f:
            f.write('not a PNG')
    with pytest.raises(SystemExit, match=rf'{path}: .*{message}'):
        _run(small_gsnet_files, tmp_path, path, '--intrinsics', paths['k'], '--mask',
             paths['mask'])
    assert not os.path.exists(tmp_path / 'out.png')


def test_a_uint16_npy_depth_is_read(frame):
    paths, depth = frame
    path = paths['depth'][:-4] + '.npy'
    np.save(path, depth)
    np.testing.assert_array_equal(demo.read_depth(path), depth)


def test_depth_scale_and_camera_files_are_named(frame, small_gsnet_files, tmp_path):
    paths, depth = frame
    metres = str(tmp_path / 'metres_uint16.png')
    cv2.imwrite(metres, (depth // 500).astype(np.uint16))  # 1 and 1.4 m rounded to 1
    with pytest.raises(SystemExit, match=rf'{metres}: the nearest depth reading is 0\.001 m .*'
                                         r'\(d \* 1000\)\.astype\(np\.uint16\) with '
                                         r'--factor-depth 1000'):
        _run(small_gsnet_files, tmp_path, metres, '--intrinsics', paths['k'], '--mask',
             paths['mask'])
    with pytest.raises(SystemExit, match=rf"{paths['depth']}: frame 0: .* beyond max_depth 3 m "
                                         r'.*no point left\. Check factor_depth'):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', paths['k'], '--mask',
             paths['mask'], '--factor-depth', '10')
    meta = str(tmp_path / 'meta.mat')
    scipy.io.savemat(meta, dict(intrinsic_matrix=K, factor_depth=np.array([[1000.0]])))
    with pytest.raises(SystemExit, match=rf'{meta}: --intrinsics takes a \(3, 3\) camera matrix '
                                         rf'as \.npy; a GraspNet meta file goes to --meta'):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', meta, '--mask',
             paths['mask'])
    wrong = str(tmp_path / 'K2.npy')
    np.save(wrong, K[:2])
    with pytest.raises(SystemExit, match=rf'{wrong}: not a camera matrix \(intrinsics must be a '
                                         r'\(3, 3\)'):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', wrong, '--mask',
             paths['mask'])
    assert not os.path.exists(tmp_path / 'out.png')


def test_the_config_is_checked_as_tools_train_checks_it(frame, small_gsnet_files, tmp_path):
    paths, _ = frame
    with pytest.raises(SystemExit, match="model.tset_cfg: GSNet .* takes no option 'tset_cfg'; "
                                         "did you mean 'test_cfg'"):
        _run(small_gsnet_files, tmp_path, paths['depth'], '--intrinsics', paths['k'], '--mask',
             paths['mask'], '--cfg-options', 'model.tset_cfg.collision_thresh=0')
    config, checkpoint = small_gsnet_files
    cfg = Config.fromfile(config)
    cfg.model.num_seeds = 'a few'
    with pytest.raises(SystemExit, match="model.num_seeds='a few': GSNet .* takes a number for "
                                         "'num_seeds'"):
        GraspInferencer(cfg, checkpoint)
