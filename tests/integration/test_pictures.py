"""demo/grasp_demo.py and tools/analysis/browse_dataset.py write PNGs of the expected size, with
the grippers drawn as thin score-coloured outlines where the grasps are (from the camera and from
the side; intrinsics from a .npy or a GraspNet meta file) and the label points where the labels
are."""
import os

import cv2
import numpy as np
import pytest
import scipy.io

from mmgrasp.evaluation.grasp_drawing import (depth_colours, draw_scene, gripper_outlines,
                                              legend_strip, project)
from mmgrasp.storage.frames.store import masked_pixels
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from _scripts import script_module

demo = script_module('demo/grasp_demo.py')
browse = script_module('tools/analysis/browse_dataset.py')


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


def _demo(frame_files, tmp_path, name, *extra):
    out, saved = str(tmp_path / f'{name}.png'), str(tmp_path / f'{name}.npy')
    args = [frame_files['depth'], '--config', frame_files['config'], '--checkpoint',
            frame_files['checkpoint'], '--mask', frame_files['mask'], '--out', out,
            '--save-grasps', saved, *extra]
    if '--meta' not in extra:
        args += ['--intrinsics', frame_files['K']]
    assert demo.main(args) == 0
    return cv2.cvtColor(cv2.imread(out, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB), np.load(saved)


@pytest.mark.parametrize('rgb', [False, True])
def test_grasp_demo_draws_thin_outlines_at_the_grasps(frame_files, tmp_path, rgb):
    image, grasps = _demo(frame_files, tmp_path, 'grasps', '--top-k', '5',
                          *(['--rgb', frame_files['rgb']] if rgb else []))
    height, width = frame_files['shape']  # the image, and the score bar's strip at its right
    assert image.shape[:2] == (height, width + legend_strip(True, False, False))
    assert len(grasps) > 1
    drawn = grasps[np.argsort(-grasps[:, 0], kind='stable')[:5]]
    if rgb:
        background = cv2.cvtColor(cv2.imread(frame_files['rgb']), cv2.COLOR_BGR2RGB) / 255
    else:
        background = depth_colours(cv2.imread(frame_files['depth'], cv2.IMREAD_UNCHANGED),
                                   cv2.imread(frame_files['mask'], cv2.IMREAD_GRAYSCALE) > 0)
    plain = str(tmp_path / 'plain.png')
    draw_scene(background, plain)
    plain = cv2.cvtColor(cv2.imread(plain, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert (image[:, width:] < 200).any(-1).sum() > 50, 'the score legend is in the strip'
    changed = np.abs(image[:, :width].astype(int) - plain.astype(int)).max(-1) > 40
    changed[:25] = False  # the title
    outlines = project(gripper_outlines(drawn), frame_files['intrinsics'])
    near = np.zeros_like(changed)
    for uv in outlines:  # every drawn gripper changed pixels along its outline
        u0, v0 = np.floor(uv.min(axis=0)).astype(int) - 2
        u1, v1 = np.ceil(uv.max(axis=0)).astype(int) + 3
        box = (slice(max(v0, 0), max(v1, 0)), slice(max(u0, 0), max(u1, 0)))
        assert changed[box].any()
        near[box] = True
    assert not (changed & ~near).any(), 'pixels changed away from every gripper'
    # thin: the outlines cover a small part of their boxes (filled shapes covered most)
    assert changed.sum() < 0.5 * near.sum()


def test_grasp_demo_side_view_draws_the_cloud(frame_files, tmp_path):
    image, grasps = _demo(frame_files, tmp_path, 'side', '--top-k', '5', '--view', 'side',
                          '--rgb', frame_files['rgb'])
    height, width = frame_files['shape']
    assert image.shape[:2] == (height, width + legend_strip(True, False, False)) and len(grasps)
    drawn = (np.abs(image.astype(int) - 255).max(-1) > 30)[25:, :width]
    assert drawn.mean() > 0.02  # the turned cloud, on white


def _write_meta(path, intrinsics, factor_depth):
    """A meta file in GraspNet's format (scenes/*/<camera>/meta/%04d.mat): object poses, class
    indexes, intrinsic_matrix, factor_depth."""
    scipy.io.savemat(path, {'poses': np.zeros((3, 4, 1), np.float32),
                            'cls_indexes': np.array([[1]], np.int64),
                            'intrinsic_matrix': np.asarray(intrinsics, np.float64),
                            'factor_depth': np.array([[factor_depth]], np.float64)})


def test_grasp_demo_reads_intrinsics_and_depth_factor_from_a_meta_file(frame_files, tmp_path):
    meta = str(tmp_path / 'meta.mat')
    _write_meta(meta, frame_files['intrinsics'], 1000.0)
    _, from_meta = _demo(frame_files, tmp_path, 'meta', '--meta', meta)
    _, from_k = _demo(frame_files, tmp_path, 'k', '--factor-depth', '1000')
    np.testing.assert_array_equal(from_meta, from_k)
    # the meta file's depth factor is used: 2000 units a metre halves every depth
    _write_meta(meta, frame_files['intrinsics'], 2000.0)
    _, half_meta = _demo(frame_files, tmp_path, 'meta2', '--meta', meta)
    _, half_k = _demo(frame_files, tmp_path, 'k2', '--factor-depth', '2000')
    np.testing.assert_array_equal(half_meta, half_k)
    assert half_meta.shape != from_meta.shape or not np.array_equal(half_meta, from_meta)
    bad = str(tmp_path / 'bad.mat')
    scipy.io.savemat(bad, {'intrinsic_matrix': frame_files['intrinsics']})
    with pytest.raises(SystemExit, match="bad.mat: no 'factor_depth'"):
        demo.read_meta(bad)
    scipy.io.savemat(bad, {'intrinsic_matrix': np.eye(2), 'factor_depth': [[1000.0]]})
    with pytest.raises(SystemExit, match='bad.mat: intrinsic_matrix must be'):
        demo.read_meta(bad)


def test_browse_dataset_draws_label_points(frame_files, tmp_path, synthetic_root):
    for colour in ('graspness', 'mu'):
        out_dir = str(tmp_path / colour)
        assert browse.main([frame_files['config'], '--output-dir', out_dir, '--num', '2',
                            '--colour', colour]) == 0
        names = sorted(os.listdir(out_dir))
        assert names == ['scene_0000_0000.png', 'scene_0000_0001.png']
        image = cv2.imread(os.path.join(out_dir, names[0]), cv2.IMREAD_COLOR)
        height, width = frame_files['shape']  # and the colour bar's strip
        assert image.shape[:2] == (height, width + legend_strip(False, True, False))
        image = image[:, :width]
        plain = tmp_path / f'plain_{colour}.png'
        reader = GraspNetReader(synthetic_root, 'realsense')
        draw_scene(depth_colours(reader.load_depth(0, 0)), str(plain))
        changed = np.abs(image.astype(int) - cv2.imread(str(plain)).astype(int)).max(-1) > 40
        seg = reader.load_segmentation(0, 0) > 0
        # graspness: the sampled cloud everywhere; mu: label points on the objects only
        assert changed.any()
        if colour == 'mu':
            grown = cv2.dilate(seg.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
            body = changed[25:]  # away from the title
            assert body.sum() > 100
            assert (body & grown[25:]).sum() > 0.95 * body.sum()
