"""GraspInferencer and demo/grasp_demo.py run an HGGD checkpoint on an RGB-D image: with a
dataset frame's id and the intrinsics the test pipeline uses, exactly what tools/test.py dumps
for the frame; the demo draws its picture and saves the same grasps; the colour image is
required and checked, a workspace is refused (HGGD sees the whole image)."""
import os
import re
import shlex
import subprocess
import sys
import warnings

import cv2
import numpy as np
import pytest
import scipy.io

from mmgrasp.apis import GraspInferencer
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.transforms.hggd import REFERENCE_INTRINSICS
from mmgrasp.registry import TRANSFORMS

from _scripts import script_module
from _test_tool_dump import ENV, REPO, initial_weights_dump

demo = script_module('demo/grasp_demo.py')

pytestmark = pytest.mark.skipif(
    'LoadRGBDImage' not in TRANSFORMS.module_dict,
    reason="LoadRGBDImage (the frame store's RGB-D images) is not on this branch yet")


@pytest.fixture(scope='module')
def hggd_files(synthetic_root, tmp_path_factory):
    """configs/hggd_demo.py at a 128 x 72 input (the session frames are 320 x 180), its test
    loader on the session frames, the initial weights (seed 0), and tools/test.py's dump."""
    tmp = tmp_path_factory.mktemp('hggd_inferencer')
    return initial_weights_dump(tmp, 'small_hggd.py', f"""
_base_ = ['{REPO}/configs/hggd_demo.py']
model = dict(data_preprocessor=dict(input_size=(128, 72)), heat_threshold=0.0)
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{synthetic_root}', split='train', pipeline=[
        dict(type='LoadRGBDImage'), dict(type='SampleDepthPixels', num_points=1500),
        dict(type='PackHGGDInputs')]))
""")


def _frame(root, scene, index):
    reader = GraspNetReader(root, 'realsense')
    return reader.load_rgb(scene, index), reader.load_depth(scene, index)


def test_inferencer_runs_hggd_as_the_test_tool(hggd_files, synthetic_root):
    config, checkpoint, dump = hggd_files
    expected = np.load(os.path.join(dump, 'scene_0000', 'realsense', '0001.npy'))
    assert len(expected) > 0
    inferencer = GraspInferencer(config, checkpoint, nms=False)
    rgb, depth = _frame(synthetic_root, 0, 1)
    k = REFERENCE_INTRINSICS['realsense']  # what PackHGGDInputs gives GraspNet's cameras
    np.testing.assert_array_equal(inferencer(depth, k, rgb=rgb, frame_id=(0, 'realsense', 1)),
                                  expected)
    # the model's NMS already ran: the inferencer's own (default) changes nothing
    again = GraspInferencer(config, checkpoint)(depth, k, rgb=rgb, frame_id=(0, 'realsense', 1))
    np.testing.assert_array_equal(again, expected)
    # without an id: the image's cloud draw, the model's keyed by the place in the call
    first, _ = inferencer([depth, depth], k, rgb=[rgb, rgb])
    assert len(first) and np.isfinite(first).all() and first.shape[1] == 17
    np.testing.assert_array_equal(inferencer(depth, k, rgb=rgb), first)


def test_inferencer_checks_the_colour_image(hggd_files, synthetic_root):
    config, checkpoint, _ = hggd_files
    inferencer = GraspInferencer(config, checkpoint)
    rgb, depth = _frame(synthetic_root, 0, 1)
    k = REFERENCE_INTRINSICS['realsense']
    with pytest.raises(ValueError, match='needs the colour image'):
        inferencer(depth, k)
    with pytest.raises(ValueError, match='whole image'):
        inferencer(depth, k, rgb=rgb, mask=depth > 0)
    with pytest.raises(ValueError, match=r'\(180, 320, 3\)'):
        inferencer(depth, k, rgb=rgb[:-1])
    with pytest.raises(TypeError, match='uint8'):
        inferencer(depth, k, rgb=rgb.astype(np.float32))


def page_demo_commands() -> list:
    """The demo command lines of HGGD's page (configs/hggd/README.md), as argument lists."""
    with open(os.path.join(REPO, 'configs', 'hggd', 'README.md')) as f:
        blocks = re.findall(r'```bash\n(.*?)\n```', f.read(), re.S)
    return [shlex.split(line) for block in blocks for line in block.splitlines()
            if line.startswith('python demo/grasp_demo.py')]


def _with(command, **values):
    """``command`` with the values of its options replaced (each must be there)."""
    args = list(command)
    for name, value in values.items():
        flag = '--' + name.replace('_', '-')
        args[args.index(flag) + 1] = value
    return args


@pytest.mark.slow  # demo/grasp_demo.py in a subprocess, twice
def test_demo_runs_an_hggd_checkpoint(hggd_files, synthetic_root, tmp_path):
    """The page's dataset-frame command, with this test's config, checkpoint, data and frame."""
    config, checkpoint, dump = hggd_files
    out_png, grasps = str(tmp_path / 'hggd.png'), str(tmp_path / 'hggd.npy')
    (command, ) = [c for c in page_demo_commands() if '--data-root' in c]
    assert command[:2] == ['python', 'demo/grasp_demo.py']
    args = _with(command[1:], config=config, checkpoint=checkpoint, data_root=synthetic_root,
                 scene='0', frame='1', out=out_png)
    out = subprocess.run([sys.executable, *args, '--save-grasps', grasps], cwd=REPO,
                         capture_output=True, text=True, timeout=600, env=ENV)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert os.path.getsize(out_png) > 0
    np.testing.assert_array_equal(
        np.load(grasps), np.load(os.path.join(dump, 'scene_0000', 'realsense', '0001.npy')))
    refused = subprocess.run([sys.executable, 'demo/grasp_demo.py', '--config', config,
                              '--checkpoint', checkpoint, '--data-root', synthetic_root,
                              '--scene', '0', '--frame', '1', '--out', out_png,
                              '--all-readings'], cwd=REPO, capture_output=True, text=True,
                             timeout=600, env=ENV)
    assert refused.returncode != 0 and 'sees the whole image' in refused.stderr


def test_clip_depth_is_the_reference_demos_clip(hggd_files, synthetic_root):
    """clip_depth: the image the model sees has its readings beyond the limit set to it (HGGD's
    demo.py: np.clip(depth, 0, 1000) mm), so no grasp lies beyond it by more than the
    decode's reach (depth offset ≤ 20 mm, centre offset ≤ 20 mm per axis)."""
    config, checkpoint, dump = hggd_files
    inferencer = GraspInferencer(config, checkpoint, nms=False)
    rgb, depth = _frame(synthetic_root, 0, 1)
    k = REFERENCE_INTRINSICS['realsense']
    limit = float(np.percentile(depth[depth > 0], 30)) / 1000
    frame = dict(rgb=rgb, frame_id=(0, 'realsense', 1))
    plain = np.load(os.path.join(dump, 'scene_0000', 'realsense', '0001.npy'))  # no clip
    clipped = inferencer(depth, k, clip_depth=limit, **frame)
    assert len(clipped) and plain[:, 15].max() > limit + 0.04  # without it: grasps beyond
    assert clipped[:, 15].max() <= limit + 0.04 + 1e-6
    with pytest.raises(ValueError, match='clip_depth must be a positive'):
        inferencer(depth, k, clip_depth=0.0, **frame)


def test_a_frame_of_another_camera_warns(hggd_files, synthetic_root):
    """The config's camera is GraspNet's RealSense: its field of view passes quietly (the
    session frames are 320 x 180, the intrinsics scaled with them), a Kinect's is named."""
    config, checkpoint, _ = hggd_files
    inferencer = GraspInferencer(config, checkpoint)
    rgb, depth = _frame(synthetic_root, 0, 1)
    scale = np.diag([0.25, 0.25, 1.0])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        inferencer(depth, scale @ REFERENCE_INTRINSICS['realsense'], rgb=rgb)
    assert not [w for w in record if 'intrinsics' in str(w.message)]
    with pytest.warns(UserWarning, match=r"fx 157\.9, fy 157\.8 at 320 x 180 px are not the "
                      r"config's camera 'realsense' \(fx 231\.8, fy 231\.8 .*GraspNet-1Billion's "
                      r"'kinect'"):
        inferencer(depth, scale @ REFERENCE_INTRINSICS['kinect'], rgb=rgb)


def test_the_pages_own_image_command(hggd_files, synthetic_root, tmp_path):
    """The page's command for an image of one's own (depth and colour PNGs, a meta file,
    --clip-depth) runs with this test's files and gives the grasps of the image clipped by
    hand (np.minimum, as the reference's demo.py clips)."""
    config, checkpoint, _ = hggd_files
    (command, ) = [c for c in page_demo_commands() if '--data-root' not in c]
    rgb, depth = _frame(synthetic_root, 0, 1)
    k = REFERENCE_INTRINSICS['realsense']
    cv2.imwrite(str(tmp_path / 'depth.png'), depth)
    cv2.imwrite(str(tmp_path / 'color.png'), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    scipy.io.savemat(tmp_path / 'meta.mat', {'intrinsic_matrix': k,
                                             'factor_depth': np.array([[1000.0]])})
    limit = command[command.index('--clip-depth') + 1]
    args = _with(command[2:], rgb=str(tmp_path / 'color.png'), meta=str(tmp_path / 'meta.mat'),
                 config=config, checkpoint=checkpoint, out=str(tmp_path / 'own.png'))
    args[args.index('depth.png')] = str(tmp_path / 'depth.png')
    assert demo.main(args + ['--save-grasps', str(tmp_path / 'own.npy')]) == 0
    by_hand = np.minimum(depth, np.uint16(round(float(limit) * 1000)))  # the reference's clip
    expected = GraspInferencer(config, checkpoint)(by_hand, k, rgb=rgb)
    np.testing.assert_array_equal(np.load(tmp_path / 'own.npy'), expected)
