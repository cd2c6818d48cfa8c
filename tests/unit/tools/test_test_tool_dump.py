"""tools/test.py refuses a --dump folder that already holds files (an earlier run's dumps would
be overwritten silently) unless --overwrite; an empty or new folder is used as given."""
import os

import pytest

from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


class _Reached(Exception):
    """The tool got past its checks to building the Runner."""


@pytest.fixture
def tool(monkeypatch):
    module = script_module('tools/test.py')

    def reached(cfg):
        raise _Reached(cfg.test_evaluator.dump_dir)
    monkeypatch.setattr(module.Runner, 'from_cfg', staticmethod(reached))
    return module


def _main(tool, dump, tmp_path, *extra):
    # an existing data root: tools/test.py refuses a missing one before these checks matter
    return tool.main([os.path.join(REPO, 'configs', 'gsnet_gc6d_demo.py'), 'epoch_1.pth',
                      '--dump', str(dump), '--work-dir', str(tmp_path / 'work'), '--cfg-options',
                      f'test_dataloader.dataset.data_root={tmp_path}',
                      f'test_evaluator.data_root={tmp_path}', *extra])


def test_a_dump_folder_with_files_is_refused(tool, tmp_path):
    dump = tmp_path / 'dump'
    (dump / '000003' / 'realsense-d435').mkdir(parents=True)
    (dump / '000003' / 'realsense-d435' / '000002.npy').write_bytes(b'earlier run')
    with pytest.raises(SystemExit, match=rf'{dump} already holds files .*--overwrite'):
        _main(tool, dump, tmp_path)
    assert (dump / '000003' / 'realsense-d435' / '000002.npy').read_bytes() == b'earlier run'
    with pytest.raises(_Reached, match=str(dump)):
        _main(tool, dump, tmp_path, '--overwrite')


@pytest.mark.parametrize('exists', [False, True])
def test_a_new_or_empty_dump_folder_is_used(tool, tmp_path, exists):
    dump = tmp_path / 'dump'
    if exists:
        dump.mkdir()
    with pytest.raises(_Reached, match=str(dump)):
        _main(tool, dump, tmp_path)
