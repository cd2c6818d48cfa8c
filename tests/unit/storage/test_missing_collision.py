"""A scene on disk without its collision label file: the build stops naming the file, or (with
``skip_missing_collision``) leaves the scene out loudly, records it in the manifest, and
training refuses the scene's frames naming the file — on both layouts and on the lazy path."""
import json
import logging
import os
import shutil

import pytest

from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader
from mmgrasp.datasets.graspnet_reader import GraspNetReader
from mmgrasp.storage.derived_assets import current_version
from mmgrasp.storage.labels.store import build_label_store, open_label_store, store_path_for
from mmgrasp.storage.source import DatasetFileError


@pytest.fixture
def without_scene_1(synthetic_root, tmp_path) -> str:
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    shutil.rmtree(os.path.join(root, 'collision_label', 'scene_0001'))
    return root


def _missing(root: str) -> str:
    return os.path.join(root, 'collision_label', 'scene_0001', 'collision_labels.npz')


def test_build_stops_naming_the_missing_file(without_scene_1, tmp_path):
    cache = str(tmp_path / 'cache')
    with pytest.raises(DatasetFileError, match='--skip-missing-collision') as info:
        build_label_store(GraspNetReader(without_scene_1), cache)
    assert info.value.path == _missing(without_scene_1)
    assert 'scene 1 is on disk but has no collision labels' in str(info.value)
    assert current_version(store_path_for(without_scene_1, cache)) is None  # nothing half-built


def test_build_tool_exits_naming_the_file(without_scene_1, tmp_path, capsys):
    from tools.data.build_label_store import main
    with pytest.raises(SystemExit) as info:
        main([without_scene_1, '--cache', str(tmp_path / 'cache')])
    assert _missing(without_scene_1) in str(info.value.code)


def test_skip_is_loud_recorded_and_training_refuses_the_scene(without_scene_1, capsys,
                                                              make_dataset):
    from tools.data.build_label_store import main
    main([without_scene_1, '--skip-missing-collision'])  # the session cache: training's store
    out = capsys.readouterr().out
    assert 'scenes: 1' in out and f'skipped scene 1: collision label file ' \
                                  f'{_missing(without_scene_1)} is missing' in out
    store = open_label_store(GraspNetReader(without_scene_1))  # no option: opened, not rebuilt
    assert sorted(store.scenes) == [0]
    assert store.skipped_scenes == {1: _missing(without_scene_1)}
    with open(os.path.join(store.path, 'manifest.json')) as f:
        assert json.load(f)['skipped_scenes'] == {
            '0001': 'collision_label/scene_0001/collision_labels.npz'}
    dataset = make_dataset('deferred', root=without_scene_1)
    scene_1 = [i for i in range(len(dataset)) if dataset.get_data_info(i)['scene'] == 1]
    scene_0 = next(i for i in range(len(dataset)) if dataset.get_data_info(i)['scene'] == 0)
    dataset[scene_0]  # the kept scene trains
    with pytest.raises(DatasetFileError, match='left out of the label store') as info:
        dataset[scene_1[0]]
    assert _missing(without_scene_1) in str(info.value)


def test_skip_warns_naming_the_file(without_scene_1, tmp_path, monkeypatch):
    import mmgrasp.storage.labels.store as store_module
    logged = []
    monkeypatch.setattr(store_module, 'print_log',
                        lambda msg, logger=None, level=logging.INFO: logged.append((level, msg)))
    build_label_store(GraspNetReader(without_scene_1), str(tmp_path / 'cache'),
                      skip_missing_collision=True)
    warnings = [msg for level, msg in logged if level == logging.WARNING]
    assert len(warnings) == 1 and 'scene 1 SKIPPED' in warnings[0] \
        and _missing(without_scene_1) in warnings[0]


def test_lazy_build_in_training_stops_naming_the_file(without_scene_1, make_dataset):
    with pytest.raises(DatasetFileError) as info:
        make_dataset('deferred', root=without_scene_1)
    assert info.value.path == _missing(without_scene_1)


def test_strict_store_goes_stale_when_a_collision_file_disappears(synthetic_root, tmp_path):
    root = str(tmp_path / 'graspnet')
    shutil.copytree(synthetic_root, root)
    cache = str(tmp_path / 'cache')
    build_label_store(GraspNetReader(root), cache)
    shutil.rmtree(os.path.join(root, 'collision_label', 'scene_0001'))
    with pytest.raises(DatasetFileError) as info:
        open_label_store(GraspNetReader(root), cache)
    assert info.value.path == _missing(root)


def test_graspclutter6d_layout(gc6d_root, tmp_path):
    root = str(tmp_path / 'graspclutter6d')
    shutil.copytree(gc6d_root, root)
    missing = os.path.join(root, 'collision_label', '000002.npz')
    os.remove(missing)
    with pytest.raises(DatasetFileError) as info:
        build_label_store(GraspClutter6DReader(root), str(tmp_path / 'cache'))
    assert info.value.path == missing
    store = build_label_store(GraspClutter6DReader(root), str(tmp_path / 'cache'),
                              skip_missing_collision=True)
    assert 2 not in store.scenes and store.skipped_scenes == {2: missing}
