"""GSNet graspness labels: reference layout, masked-cloud order, values by brute force."""
import shutil

import numpy as np
from scipy.spatial.distance import cdist

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.graspness import generate_graspness
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.transforms.loading import depth_to_cloud, workspace_mask


def test_graspness_files_match_brute_force(synthetic_root, tmp_path):
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns('graspness'))
    assert generate_graspness(root, scenes=[0]) == 3
    assert generate_graspness(root, scenes=[0]) == 0  # existing files are kept
    reader = GraspNetReader(root)
    scene, frame = 0, 1
    graspness = np.load(reader.graspness_path(scene, frame))
    depth, seg = reader.load_depth(scene, frame), reader.load_segmentation(scene, frame)
    meta = reader.load_meta(scene, frame)
    cloud = depth_to_cloud(depth, meta.intrinsics, meta.factor_depth)
    mask = (depth > 0) & workspace_mask(cloud, seg, reader.trajectory(scene).camera_to_table(frame),
                                        0.02)
    masked = cloud.reshape(-1, 3)[mask.reshape(-1)]
    assert graspness.shape == (len(masked), 1) and graspness.dtype == np.float32
    assert graspness.min() == 0 and graspness.max() == 1
    collisions = reader.load_collision(scene)
    points, raw = [], []
    for instance, (obj, pose) in enumerate(zip(meta.object_ids, meta.poses)):
        label = reader.load_grasp_label(int(obj))
        mu = label['scores'].reshape(len(label['scores']), -1)
        valid = (mu > 0) & (mu <= 0.8) & ~collisions[instance].reshape(len(mu), -1)
        raw.append(valid.mean(axis=1))
        points.append(label['points'].astype(np.float64) @ pose[:, :3].T + pose[:, 3])
    points, raw = np.concatenate(points), np.concatenate(raw)
    nearest = cdist(masked, points).argmin(axis=1)  # brute force, every masked point
    values = raw[nearest]
    expected = (values - values.min()) / (values.max() - values.min())
    np.testing.assert_allclose(graspness[:, 0], expected, atol=1e-6)


def test_load_grasp_scene_reads_graspness_aligned(synthetic_root, tmp_path):
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root, ignore=shutil.ignore_patterns('graspness'))
    generate_graspness(root)
    dataset = GraspNetDataset(root, pipeline=[dict(type='LoadGraspScene', num_points=500,
                                                   with_graspness=True)])
    results = dataset[(0, 2)]
    stored = np.load(dataset.reader.graspness_path(results['scene'], results['frame']))[:, 0]
    np.testing.assert_array_equal(results['graspness'], stored[results['point_index']])
