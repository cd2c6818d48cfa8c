"""LoadRGBDImage and the image store: the same images from the PNG files and from the store,
checked against an independent decoder (PIL, RGB order by the PNG standard) and the meta files
read directly; built only when a pipeline asks for images; stale, foreign and broken sources."""
import glob
import json
import os
import shutil

import numpy as np
import pytest
import scipy.io
from PIL import Image

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.datasets.layouts import open_reader
from mmgrasp.datasets.transforms import LoadRGBDImage
from mmgrasp.storage.frames.images import (ImageStoreError, image_store_path, open_image_store)
from mmgrasp.storage.source import DatasetFileError

KEYS = ('rgb', 'depth', 'intrinsics', 'factor_depth', 'camera')


def meta_camera(reader, scene: int, frame: int):
    """(intrinsics, factor_depth) read from the meta files directly, not through the reader."""
    if reader.layout == 'graspnet':
        mat = scipy.io.loadmat(reader.frame_path(scene, 'meta', frame))
        return mat['intrinsic_matrix'], float(mat['factor_depth'][0, 0])
    with open(reader.scene_camera_path(scene)) as f:
        entry = json.load(f)[str(reader.image_id(frame))]
    return np.reshape(entry['cam_K'], (3, 3)), {'realsense-d435': 1000.0, 'zivid': 10000.0}[
        reader.camera]


@pytest.mark.parametrize('layout, camera', [('graspnet', 'realsense'),
                                            ('graspclutter6d', 'realsense-d435'),
                                            ('graspclutter6d', 'zivid')])
def test_files_and_store_give_the_frame_images(layout, camera, synthetic_root, gc6d_root,
                                               tmp_path):
    root = synthetic_root if layout == 'graspnet' else gc6d_root
    reader = open_reader(root, camera)
    files, frames = LoadRGBDImage(source='files'), LoadRGBDImage(cache_dir=str(tmp_path))
    assert frames.source == 'frames'  # the default
    for scene in reader.present_scenes()[:2]:
        for frame in (0, 2):
            a, b = (t(dict(reader=reader, scene=scene, frame=frame)) for t in (files, frames))
            for key in KEYS:
                if isinstance(a[key], np.ndarray):
                    assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes()
                else:
                    assert a[key] == b[key], key
            assert b['rgb'].flags.writeable and b['rgb'].shape == (180, 320, 3)
            assert b['depth'].dtype == np.uint16 and b['depth'].shape == (180, 320)
            png = np.asarray(Image.open(reader.frame_path(scene, 'rgb', frame)))
            np.testing.assert_array_equal(b['rgb'], png)  # PIL decodes in RGB order
            np.testing.assert_array_equal(
                b['depth'], np.asarray(Image.open(reader.frame_path(scene, 'depth', frame))))
            intrinsics, factor_depth = meta_camera(reader, scene, frame)
            assert b['intrinsics'].dtype == np.float64 and b['intrinsics'].shape == (3, 3)
            np.testing.assert_array_equal(b['intrinsics'], intrinsics)
            assert b['factor_depth'] == factor_depth and b['camera'] == camera


@pytest.mark.parametrize('root_name', ['synthetic_root', 'gc6d_root'])
def test_the_synthetic_writers_store_rgb_in_rgb_order(root_name, request):
    """The table is drawn in (170, 160, 150) times a shade: red over green over blue once
    decoded in RGB order (OpenCV writes BGR arrays, so the writer reverses its channels)."""
    reader = open_reader(request.getfixturevalue(root_name), 'realsense')
    scene = reader.present_scenes()[0]
    rgb = LoadRGBDImage(source='files')(dict(reader=reader, scene=scene, frame=0))['rgb']
    seg = reader.load_segmentation(scene, 0)
    table = rgb[(seg == 0) & (reader.load_depth(scene, 0) > 0)].astype(int)
    assert len(table) > 1000
    assert (table[:, 0] >= table[:, 1]).all() and (table[:, 1] >= table[:, 2]).all()
    assert (table[:, 0] > table[:, 2]).mean() > 0.9


def test_point_recipes_never_build_the_image_store(synthetic_root, tmp_path, monkeypatch):
    cache = tmp_path / 'cache'
    monkeypatch.setenv('MMGRASP_CACHE', str(cache))
    GraspNetDataset(synthetic_root, pipeline=[dict(type='LoadGraspScene', num_points=300)])
    assert glob.glob(str(cache / 'frames-*')) and not glob.glob(str(cache / 'images-*'))
    dataset = GraspNetDataset(synthetic_root, pipeline=[dict(type='LoadRGBDImage')])
    store = glob.glob(str(cache / 'images-*' / 'store-*'))
    assert len(store) == 1  # built by the dataset, before any sample
    rgb = np.load(os.path.join(store[0], 'rgb.npy'), mmap_mode='r')
    assert rgb.dtype == np.uint8 and rgb.shape == (6, 180, 320, 3)
    depth = np.load(os.path.join(store[0], 'depth.npy'), mmap_mode='r')
    assert depth.dtype == np.uint16 and depth.shape == (6, 180, 320)
    assert dataset[3]['rgb'].tobytes() == rgb[3].tobytes()


def test_stale_foreign_and_broken_sources(synthetic_root, tmp_path):
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    cache = str(tmp_path / 'cache')
    reader = open_reader(root, 'realsense')
    first = open_image_store(reader, cache)
    os.utime(reader.frame_path(1, 'rgb', 2), ns=(1, 1))
    with pytest.raises(ImageStoreError, match=r'1 source files changed.*rgb/0002\.png'):
        open_image_store(reader, cache, build=False)
    assert open_image_store(reader, cache).path != first.path
    # a store folder copied from another root is refused
    other = image_store_path(synthetic_root, 'realsense', cache)
    shutil.copytree(os.path.dirname(first.path), other)
    with pytest.raises(ImageStoreError, match='it was built with root='):
        open_image_store(open_reader(synthetic_root, 'realsense'), cache, build=False)
    # a frame of another size, then an undecodable one, fail the build naming the file
    small = reader.frame_path(1, 'rgb', 1)
    Image.open(small).resize((160, 90)).save(small)
    with pytest.raises(DatasetFileError, match=r'rgb/0001\.png: is 160x90 but the depth image'):
        open_image_store(reader, cache)
    with open(small, 'wb') as f:
        f.write(b'no PNG')
    with pytest.raises(DatasetFileError, match='cannot decode PNG') as error:
        open_image_store(reader, cache)
    assert error.value.path == small
    assert any("LoadRGBDImage(source='files')" in note for note in error.value.__notes__)
    with pytest.raises(ValueError, match='source'):
        LoadRGBDImage(source='png')
