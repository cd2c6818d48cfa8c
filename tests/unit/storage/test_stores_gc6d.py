"""The label and frame stores built from a GraspClutter6D root: per-instance collision rows in
scene_gt order (duplicates included), frames equal to the files path, staleness from the
GraspClutter6D sources (scene_camera.json, scene_gt.json)."""
import json
import os
import shutil

import numpy as np
import pytest

from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader
from mmgrasp.storage.frames.store import (FrameStoreError, frame_store_path, open_frame_store,
                                          read_frame, stale_reason)
from mmgrasp.storage.labels.store import open_label_store, unpack_rows
from mmgrasp.storage.labels.store import stale_reason as label_stale_reason


def test_label_store_rows_follow_scene_gt(gc6d_root, tmp_path):
    reader = GraspClutter6DReader(gc6d_root)
    store = open_label_store(reader, str(tmp_path))
    assert sorted(store.scenes) == [1, 2, 3]
    collision = np.load(store.collision_file(1))
    with np.load(reader.collision_label_path(1)) as npz:
        masks = [npz[f'arr_{i}'] for i in range(len(npz.files))]
    ids = store.scenes[1].object_ids
    assert list(ids) == reader.load_meta(1, 0).object_ids.tolist() and len(set(ids)) < len(ids)
    for i, mask in enumerate(masks):
        offset = store.collision_row_offset(1, i)
        rows = unpack_rows(collision[offset:offset + len(mask)], store.grid)
        np.testing.assert_array_equal(rows, mask)
    assert label_stale_reason(store.manifest, reader) is None


def test_frame_store_equals_files_for_every_camera(gc6d_root, tmp_path):
    for camera in ('realsense-d435', 'zivid'):
        reader = GraspClutter6DReader(gc6d_root, camera)
        store = open_frame_store(reader, 0.02, str(tmp_path))
        assert len(store) == 9
        for scene in (1, 2, 3):
            for frame in range(3):
                files = read_frame(reader, scene, frame, 0.02,
                                   with_graspness=os.path.isfile(reader.graspness_path(scene,
                                                                                       frame)))
                stored = store.frame(scene, frame)
                for name in ('depth', 'pixels', 'seg', 'object_ids', 'poses', 'intrinsics',
                             'camera_to_table'):
                    np.testing.assert_array_equal(getattr(stored, name), getattr(files, name))
                assert stored.factor_depth == files.factor_depth == reader.load_meta(
                    scene, frame).factor_depth
                if files.graspness is not None:
                    np.testing.assert_array_equal(stored.graspness, files.graspness)


def test_frame_store_goes_stale_with_scene_camera_json(gc6d_root, tmp_path):
    root = str(tmp_path / 'gc6d')
    shutil.copytree(gc6d_root, root)
    reader = GraspClutter6DReader(root)
    store = open_frame_store(reader, 0.02, str(tmp_path / 'cache'))
    fingerprints = np.load(os.path.join(store.path, 'fingerprints.npy'))
    assert stale_reason(store.manifest, fingerprints, reader, 0.02) is None
    path = reader.scene_camera_path(2)
    with open(path) as f:
        payload = json.load(f)
    with open(path, 'w') as f:
        json.dump(payload, f, indent=2)
    assert stale_reason(store.manifest, fingerprints, GraspClutter6DReader(root), 0.02) == \
        'source scene_camera.json of scene 0002 changed since the store was built'


def test_a_store_of_another_camera_is_refused(gc6d_root, tmp_path):
    cache = str(tmp_path / 'cache')
    d435 = open_frame_store(GraspClutter6DReader(gc6d_root, 'realsense-d435'), 0.02, cache)
    zivid = GraspClutter6DReader(gc6d_root, 'zivid')
    shutil.copytree(os.path.dirname(d435.path), frame_store_path(gc6d_root, 'zivid', 0.02, None,
                                                                 cache))
    with pytest.raises(FrameStoreError, match="it was built with camera='realsense-d435'"):
        open_frame_store(zivid, 0.02, cache, build=False)
    assert open_frame_store(zivid, 0.02, cache).manifest['camera'] == 'zivid'
