"""tools/data/make_dataset.py: two shards (labels, then scenes, then the store) write the same
dataset as one run, file for file; a rerun redoes nothing; Kinect depth noise moves the depth
only; the scenes step of a shard refuses to start before every object has labels; a refused
mesh gets one line and no file; the labels' own grasps hold in a generated scene under the
evaluator; the guide's pictures drawn from the result."""
import csv
import json
import os

import cv2
import numpy as np
import pytest

trimesh = pytest.importorskip('trimesh')
pytest.importorskip('pybullet')

from mmgrasp.evaluation.cli import main as eval_main  # noqa: E402
from _scripts import script_module  # noqa: E402

SMALL = ['--scenes', '1', '--test-scenes', '1', '--objects', '3', '--views', '2',
         '--cameras', 'realsense', '--image-size', '64', '48', '--voxel-size', '0.03',
         '--sdf-resolution', '0.004', '--sdf-backend', 'numpy',
         '--gripper', 'num_views=6', 'num_angles=3', 'num_depths=2']


def _main(path='tools/data/make_dataset.py'):
    return script_module(path).main


def _files(root):
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = path
    return out


def _same(a, b):
    if a.endswith('.npz'):  # zip members carry a time stamp: compare the arrays
        with np.load(a) as x, np.load(b) as y:
            return sorted(x) == sorted(y) and all(np.array_equal(x[k], y[k]) for k in x)
    with open(a, 'rb') as x, open(b, 'rb') as y:
        return x.read() == y.read()


@pytest.fixture(scope='module')
def meshes(tmp_path_factory):
    folder = tmp_path_factory.mktemp('meshes')
    for i, extents in enumerate([(0.06, 0.04, 0.03), (0.05, 0.05, 0.04), (0.08, 0.03, 0.02)]):
        trimesh.creation.box(extents=extents).export(str(folder / f'{i:03d}_box.obj'))
    return folder


@pytest.mark.slow  # four runs of the tool, the oracle, the evaluator and the pictures
def test_shards_make_the_same_dataset_as_one_run(meshes, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('MMGRASP_CACHE', str(tmp_path / 'cache'))
    main = _main()
    one, two = str(tmp_path / 'one'), str(tmp_path / 'two')
    assert main([str(meshes), one, *SMALL]) == 0
    assert main([str(meshes), two, *SMALL, '--steps', 'scenes', '--shard', '1/2']) == 3
    assert 'run --steps labels of every shard first' in capsys.readouterr().err
    for step in ('labels', 'scenes'):
        for shard in ('0/2', '1/2'):
            assert main([str(meshes), two, *SMALL, '--steps', step, '--shard', shard]) == 0
    assert main([str(meshes), two, *SMALL, '--steps', 'store']) == 0
    with open(os.path.join(one, 'grasp_label', '000_labels.json')) as f:
        assert json.load(f)['label_backend'] == 'torch'  # the default, batched backend
    a, b = _files(one), _files(two)
    assert sorted(a) == sorted(b)
    assert {'grasp_label/002_labels.npz', 'scenes/scene_0100/realsense/depth/0001.png',
            'collision_label/scene_0000/collision_labels.npz',
            'graspness/scene_0000/realsense/0001.npy'} <= set(a)
    assert [k for k in sorted(a) if not _same(a[k], b[k])] == []
    # the labels' own grasps, posed in a generated test scene, as the evaluator judges them
    # (graspnetAPI's rules): every one it scores holds and none collides with the scene
    dump = tmp_path / 'oracle'
    assert _main('tools/analysis/label_oracle_dump.py')(
        [one, '--scenes', '100', '--dump', str(dump), '--mu-max', '1.0']) == 0
    diagnose = tmp_path / 'diagnose'
    eval_main([one, str(dump), '--camera', 'realsense', '--scenes', '100', '--diagnose',
               str(diagnose), '--no-progress'])
    with open(diagnose / 'frames.csv') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and all(int(r['evaluated']) > 0 for r in rows)
    assert all(r['force_closure'] == r['evaluated'] and r['collided'] == '0' for r in rows)
    pictures = tmp_path / 'pictures'  # the guide's pictures of a generated dataset
    assert _main('tools/analysis/draw_generated_dataset.py')(
        [one, '--scene', '100', '--frame', '1', '--object', '2', '--out-dir',
         str(pictures)]) == 0
    assert cv2.imread(str(pictures / 'own_objects_scene.png')).shape == (48, 3 * 64, 3)
    assert os.path.getsize(pictures / 'own_objects_labels.png') > 10_000
    capsys.readouterr()
    stamps = {k: os.stat(p).st_mtime_ns for k, p in a.items()}
    assert main([str(meshes), one, *SMALL]) == 0  # a rerun redoes nothing
    out = capsys.readouterr().out
    assert out.count('up to date, skipped') == 5  # three objects, two scenes
    assert stamps == {k: os.stat(p).st_mtime_ns for k, p in _files(one).items()}
    # --depth-noise kinect: the scene is redone (its stamp changed) from the same drop, so the
    # instance labels stay and every depth reading moves by millimetres
    assert main([str(meshes), two, *SMALL, '--steps', 'scenes', '--depth-noise',
                 'kinect']) == 0
    for name in ('label', 'depth'):
        x, y = (cv2.imread(os.path.join(r, 'scenes', 'scene_0000', 'realsense', name,
                                        '0000.png'), cv2.IMREAD_UNCHANGED).astype(np.int64)
                for r in (one, two))
        if name == 'label':
            np.testing.assert_array_equal(x, y)
        else:
            assert ((x > 0) == (y > 0)).all() and 0 < np.abs(x - y).mean() < 10


def test_refused_mesh_gets_a_line_and_no_file(meshes, tmp_path, capsys):
    src = tmp_path / 'src'
    src.mkdir()
    trimesh.creation.box(extents=(60, 40, 30)).export(str(src / '000_mm.stl'))
    box = trimesh.creation.box(extents=(0.06, 0.04, 0.03))
    trimesh.Trimesh(box.vertices, box.faces[2:]).export(str(src / '001_open.ply'))
    out = tmp_path / 'out'
    assert _main()([str(src), str(out), *SMALL]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and 'use --scale 0.001' in err[0] and 'open: 4 edges' in err[1]
    assert 'nothing written' in err[2] and not out.exists()
