"""Mesh intake: open, flat, millimetre, inside-out and inconsistently wound meshes refused with
one line each naming the file; a run whose every mesh is refused writes nothing."""
import numpy as np
import pytest

trimesh = pytest.importorskip('trimesh')

from mmgrasp.datasets.labelgen.intake import check_mesh, intake_meshes  # noqa: E402
from _scripts import script_module  # noqa: E402


def _box(path, extents=(0.05, 0.04, 0.03), drop=0, flip=False, flip_one=False):
    mesh = trimesh.creation.box(extents=extents)
    faces = mesh.faces[drop:].copy()
    if flip:
        faces = faces[:, ::-1]
    if flip_one:
        faces[0] = faces[0, ::-1]
    trimesh.Trimesh(mesh.vertices, faces, process=False).export(str(path))
    return str(path)


def test_closed_meshes_accepted_in_every_format(tmp_path):
    for ext in ('obj', 'ply', 'stl'):
        mesh = check_mesh(_box(tmp_path / f'box.{ext}'))
        assert mesh.faces.shape == (12, 3)
        np.testing.assert_allclose(mesh.vertices.max(0) - mesh.vertices.min(0),
                                   [0.05, 0.04, 0.03], atol=1e-6)
    mm = check_mesh(_box(tmp_path / 'mm.stl', (50, 40, 30)), scale=0.001)
    np.testing.assert_allclose(mm.vertices.max(0), [0.025, 0.02, 0.015], atol=1e-6)


@pytest.mark.parametrize('kind,needle', [
    ('open', 'open: 4 edges border one face only'),
    ('flat', 'open: 4 edges border one face only'),
    ('mm', 'larger than 1 m: is it in millimetres? use --scale 0.001'),
    ('tiny', 'smaller than 5 mm'),
    ('inside_out', 'inside out'),
    ('wound', 'faces wound inconsistently'),
])
def test_bad_meshes_refused_with_one_line(tmp_path, kind, needle):
    path = tmp_path / f'{kind}.obj'
    if kind == 'flat':
        trimesh.Trimesh([[0, 0, 0], [0.05, 0, 0], [0.05, 0.05, 0], [0, 0.05, 0]],
                        [[0, 1, 2], [0, 2, 3]], process=False).export(str(path))
    else:
        _box(path, {'mm': (50, 40, 30), 'tiny': (0.003, 0.002, 0.001)}.get(
            kind, (0.05, 0.04, 0.03)), drop=2 if kind == 'open' else 0,
            flip=kind == 'inside_out', flip_one=kind == 'wound')
    result = intake_meshes({7: str(path)})
    assert result.accepted == {}
    (line, ) = result.refused
    assert '\n' not in line and line.startswith(f'refused object 007: {path}: ')
    assert needle in line
    if kind == 'mm':
        assert ': 50 m across (scale 1)' in line  # its size: the largest extent


def test_a_run_of_refused_meshes_writes_nothing(tmp_path, capsys):
    src = tmp_path / 'meshes'
    src.mkdir()
    _box(src / '000_open.obj', drop=2)
    trimesh.Trimesh([[0, 0, 0], [0.05, 0, 0], [0.05, 0.05, 0], [0, 0.05, 0]],
                    [[0, 1, 2], [0, 2, 3]], process=False).export(str(src / '001_flat.ply'))
    _box(src / '002_mm.stl', (50, 40, 30))
    out = tmp_path / 'out'
    generate = script_module('tools/data/generate_grasp_labels.py').main
    assert generate([str(src), str(out), '--sdf-backend', 'numpy']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and 'nothing written' in err[-1]
    for line, name in zip(err, ('000_open.obj', '001_flat.ply', '002_mm.stl')):
        assert name in line and 'refused' in line
    assert not out.exists()
