"""GraspInferencer and demo/grasp_demo.py run a FineGrasp checkpoint: the inferencer's
pipeline asks for the sampled points' normals (the test pipeline's EstimateNormals, computed by
the model's data preprocessor) and gives exactly what tools/test.py dumps for the frame; the demo
draws its picture and saves the same grasps."""
import os
import subprocess
import sys

import numpy as np
import pytest

from mmgrasp.apis import GraspInferencer
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.frames.store import masked_pixels

from _test_tool_dump import ENV, REPO, initial_weights_dump


@pytest.fixture(scope='module')
def finegrasp_files(synthetic_root, tmp_path_factory):
    """configs/finegrasp_demo.py shrunk to the session grid (5 views), its test loader on the
    session frames with normals, the initial weights (seed 0), and tools/test.py's dump."""
    tmp = tmp_path_factory.mktemp('finegrasp_inferencer')
    return initial_weights_dump(tmp, 'small_finegrasp.py', f"""
_base_ = ['{REPO}/configs/finegrasp_demo.py']
model = dict(num_seeds=32, num_views=5, assigner=dict(num_views=5),
             backbone=dict(channels=(8,) * 8, stem_channels=8, out_channels=16),
             crop=dict(channels=(16, ), channels2=(16, ), fusion_heads=4, fusion_feedforward=32),
             head=dict(embed_channels=8), test_cfg=dict(collision_thresh=0.1))
test_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(
    data_root='{synthetic_root}', split='train', pipeline=[
        dict(type='LoadGraspScene', num_points=1200, with_masked_cloud=True),
        dict(type='EstimateNormals', apply='device'),
        dict(type='PackGraspInputs', keys=('points', 'normals'),
             meta_keys=('scene', 'frame', 'camera', 'sample_idx', 'epoch', 'masked_cloud'))]))
""")


def _frame(root, scene, index):
    reader = GraspNetReader(root, 'realsense')
    depth = reader.load_depth(scene, index)
    meta = reader.load_meta(scene, index)
    pixels = masked_pixels(depth, reader.load_segmentation(scene, index), meta.intrinsics,
                           meta.factor_depth, reader.trajectory(scene).camera_to_table(index)
                           .astype(np.float64))
    mask = np.zeros(depth.size, dtype=bool)
    mask[pixels] = True
    return depth, meta.intrinsics, meta.factor_depth, mask.reshape(depth.shape)


def test_inferencer_runs_finegrasp_as_the_test_tool(finegrasp_files, synthetic_root):
    config, checkpoint, dump = finegrasp_files
    expected = np.load(os.path.join(dump, 'scene_0000', 'realsense', '0000.npy'))
    assert 0 < len(expected) <= 32
    inferencer = GraspInferencer(config, checkpoint, nms=False)
    assert [type(t).__name__ for t in inferencer.pipeline[:2]] == ['LoadDepthImage',
                                                                    'EstimateNormals']
    depth, k, factor, mask = _frame(synthetic_root, 0, 0)
    raw = inferencer(depth, k, factor, mask, frame_id=(0, 'realsense', 0))
    np.testing.assert_array_equal(raw, expected)


@pytest.mark.slow  # demo/grasp_demo.py in a subprocess
def test_demo_runs_a_finegrasp_checkpoint(finegrasp_files, synthetic_root, tmp_path):
    config, checkpoint, _ = finegrasp_files
    out_png, grasps = str(tmp_path / 'fg.png'), str(tmp_path / 'fg.npy')
    out = subprocess.run([sys.executable, 'demo/grasp_demo.py', '--config', config,
                          '--checkpoint', checkpoint, '--data-root', synthetic_root,
                          '--scene', '0', '--frame', '0', '--out', out_png,
                          '--save-grasps', grasps], cwd=REPO, capture_output=True, text=True,
                         timeout=600, env=ENV)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert os.path.getsize(out_png) > 0
    saved = np.load(grasps)
    assert saved.ndim == 2 and saved.shape[1] == 17 and len(saved) > 0
    assert np.isfinite(saved).all()
