"""The economic asset equals what EconomicGrasp's own script wrote (tests/data/economic_golden,
see its README), and the independent numpy implementation from the raw files equals both;
mutations of each rule are caught."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import scipy.io as scio

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.datasets.synthetic import write_synthetic_dataset
from mmgrasp.storage.labels.economic import ROW_ARRAYS
from mmgrasp.storage.labels.economic_store import open_economic_labels
from mmgrasp.storage.labels.store import open_label_store

from _economic_helpers import economic_mismatches, raw_economic_scene

GOLDEN = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'economic_golden')


def record() -> dict:
    with open(os.path.join(GOLDEN, 'record.json')) as f:
        return json.load(f)


def input_digest(root: str) -> str:
    """SHA-1 over the arrays the script reads (file bytes carry timestamps)."""
    h = hashlib.sha1()
    for scene in sorted(os.listdir(os.path.join(root, 'scenes'))):
        meta = scio.loadmat(os.path.join(root, 'scenes', scene, 'realsense', 'meta', '0000.mat'))
        h.update(meta['cls_indexes'].astype(np.int64).tobytes())
        with np.load(os.path.join(root, 'collision_label', scene, 'collision_labels.npz')) as npz:
            for name in sorted(npz.files):
                h.update(name.encode() + npz[name].tobytes())
    for name in sorted(os.listdir(os.path.join(root, 'grasp_label'))):
        with np.load(os.path.join(root, 'grasp_label', name)) as npz:
            for key in ('points', 'offsets', 'scores'):
                h.update(name.encode() + key.encode() + npz[key].tobytes())
    return h.hexdigest()


def golden_scenes() -> dict:
    with np.load(os.path.join(GOLDEN, 'golden.npz')) as npz:
        out = {}
        for key in npz.files:
            scene, name = key.split('/')
            out.setdefault(int(scene.split('_')[1]), {})[name] = npz[key]
    return out


@pytest.fixture(scope='module')
def golden_root(tmp_path_factory):
    args = record()['make_synthetic']
    root = str(tmp_path_factory.mktemp('economic_golden') / 'graspnet')
    write_synthetic_dataset(root, scenes=args['scenes'], frames=args['frames'],
                            objects=args['objects'], points_per_object=args['points_per_object'],
                            grid=tuple(args['grid']), image_size=tuple(args['image_size']),
                            cameras=tuple(args['cameras']), duplicates=args['duplicates'],
                            test_scenes=(), max_label_width=args['max_label_width'],
                            seed=args['seed'], progress=False)
    digest = input_digest(root)
    if digest != record()['input_sha1']:
        pytest.fail(f'the synthetic writer no longer writes the golden\'s inputs (SHA-1 '
                    f'{digest}, golden {record()["input_sha1"]}): regenerate '
                    f'tests/data/economic_golden as its README says')
    return root


@pytest.fixture(scope='module')
def asset(golden_root, tmp_path_factory):
    store = open_label_store(open_reader(golden_root), str(tmp_path_factory.mktemp('cache')))
    return open_economic_labels(store)


def test_asset_equals_reference_script_golden(asset):
    golden = golden_scenes()
    assert sorted(asset.scenes) == sorted(golden)
    for scene, ref in golden.items():
        mine = {name: np.asarray(asset.load(scene, name)) for name in ref}
        assert economic_mismatches(ref, mine) == [], scene
        # produced by the same torch.topk call: equal bit for bit, order included
        for name, array in ref.items():
            assert mine[name].dtype == array.dtype and np.array_equal(mine[name], array), name


def test_raw_numpy_implementation_equals_golden(golden_root):
    for scene, ref in golden_scenes().items():
        assert economic_mismatches(ref, raw_economic_scene(golden_root, scene)) == []


@pytest.fixture(scope='module')
def middling_root(golden_root, tmp_path_factory):
    """The golden root with a quarter of object 0's label points moved to 0.4 < μ ≤ 0.6 (the
    synthetic μ never put a point's best grasp there, so the keep threshold was untested)."""
    root = str(tmp_path_factory.mktemp('middling') / 'graspnet')
    shutil.copytree(golden_root, root)
    path = os.path.join(root, 'grasp_label', '000_labels.npz')
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    low = arrays['scores'][: len(arrays['scores']) // 4]
    low[(low > 0) & (low <= np.float32(0.4))] = np.float32(0.5)
    np.savez(path, **arrays)
    return root


def test_asset_equals_raw_numpy_where_the_keep_threshold_decides(middling_root, tmp_path):
    store = open_label_store(open_reader(middling_root), str(tmp_path))
    asset = open_economic_labels(store)
    for scene in asset.scenes:
        mine = {name: np.asarray(asset.load(scene, name)) for name in ROW_ARRAYS}
        ref = raw_economic_scene(middling_root, scene)
        assert economic_mismatches(ref, mine) == []
        assert 'points' in economic_mismatches(
            ref, raw_economic_scene(middling_root, scene, keep_max_mu=0.6))


@pytest.mark.parametrize('mutation, caught', [
    (dict(eps=0.0), 'vgraspness'),
    (dict(view_max_mu=0.4), 'vgraspness'),
    (dict(max_width=np.inf), 'scores'),
    (dict(offset=1.0), 'scores'),
    (dict(views_by_graspness=False), 'topview'),
])
def test_mutations_are_caught(golden_root, mutation, caught):
    with np.errstate(invalid='ignore', divide='ignore'):
        mutated = raw_economic_scene(golden_root, 0, **mutation)
    assert caught in economic_mismatches(golden_scenes()[0], mutated)
