"""A depth whose nearest reading is nearer than a depth camera sees (a wrong factor_depth, e.g.
10000 on millimetre PNGs) is reported once, naming the file or image, by the dataset loader and
by GraspInferencer; plausible depth says nothing."""
import os
import shutil
import warnings

import cv2
import numpy as np
import pytest
import scipy.io

from mmgrasp.apis import GraspInferencer
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.datasets.transforms import LoadGraspScene
from mmgrasp.datasets.transforms import loading
from mmgrasp.datasets.transforms.depth_image import MIN_PLAUSIBLE_DEPTH, implausible_depth
from mmgrasp.utils.random import frame_rng

K = np.array([[60.0, 0, 25], [0, 60, 20], [0, 0, 1]])


def _depth_warnings(record) -> list:
    return [str(w.message) for w in record if 'nearer than a depth camera sees' in str(w.message)]


def test_the_bound_and_its_message():
    assert MIN_PLAUSIBLE_DEPTH == 0.1
    assert implausible_depth(600, 1000, 'x') is None
    assert implausible_depth(100, 1000, 'x') is None  # 0.1 m: the bound itself is plausible
    text = implausible_depth(600, 10000, 'f.png')
    assert text.startswith('f.png: the nearest depth reading is 0.060 m (raw 600 / '
                           'factor_depth 10000)') and 'check factor_depth' in text


def test_inferencer_warns_once_a_call_naming_the_image(small_gsnet_files, tmp_path):
    config, checkpoint = small_gsnet_files
    inferencer = GraspInferencer(config, checkpoint)
    depth = np.full((40, 50), 600, np.uint16)
    everything = np.ones(depth.shape, bool)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        inferencer(depth, K, 1000.0, everything)
    assert _depth_warnings(record) == []
    png = str(tmp_path / 'depth.png')
    cv2.imwrite(png, depth)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        inferencer(png, K, 10000.0, everything)
    (text,) = _depth_warnings(record)
    assert text.startswith(f'{png}: the nearest depth reading is 0.060 m')
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        inferencer([depth, depth], K, 10000.0, [everything, everything])
    (text,) = _depth_warnings(record)
    assert text.startswith('depth image 0: ') and text.endswith('(2 of 2 images)')


@pytest.fixture
def wrong_factor_root(synthetic_root, tmp_path) -> str:
    """The session dataset with factor_depth 10000 in every realsense meta of scene 0."""
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    meta_dir = os.path.join(root, 'scenes', 'scene_0000', 'realsense', 'meta')
    for name in os.listdir(meta_dir):
        path = os.path.join(meta_dir, name)
        meta = {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith('__')}
        meta['factor_depth'] = np.array([[10000.0]])
        scipy.io.savemat(path, meta)
    return root


def test_loader_warns_once_naming_the_files(wrong_factor_root, synthetic_root, monkeypatch):
    monkeypatch.setattr(loading, '_warned_depth', set())
    load = LoadGraspScene(num_points=200, use_workspace=False)

    def run(root, scene, frame):
        reader = GraspNetReader(root)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter('always')
            load(dict(reader=reader, scene=scene, frame=frame,
                      rng=frame_rng(0, scene, 'realsense', frame)))
        return _depth_warnings(record)

    assert run(synthetic_root, 0, 0) == []  # millimetres at factor 1000: 0.5-0.7 m
    (text,) = run(wrong_factor_root, 0, 1)
    depth = os.path.join(wrong_factor_root, 'scenes', 'scene_0000', 'realsense', 'depth',
                         '0001.png')
    assert text.startswith(f'{depth} (factor_depth of ') and 'meta/0001.mat' in text
    assert 'said once for this dataset and camera' in text
    assert run(wrong_factor_root, 0, 2) == []  # once
