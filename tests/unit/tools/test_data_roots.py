"""tools/train.py and tools/test.py stop in one line when the config's data root is not a
folder (the demo configs' ``data/synthetic`` before the Quick start's dataset step): the path,
the key, the command that writes the demo data; before any dataset is built."""
import os

import pytest

from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_train_and_test_name_a_missing_data_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/synthetic here
    config = os.path.join(REPO, 'configs', 'gsnet_demo.py')
    with pytest.raises(SystemExit) as err:
        script_module('tools/train.py').main([config, '--work-dir', str(tmp_path / 'work')])
    text = str(err.value)
    assert '\n' not in text and 'data root data/synthetic' in text
    assert 'train_dataloader.dataset.data_root' in text
    assert 'python tools/data/make_synthetic.py data/synthetic --scenes 4' in text
    assert not (tmp_path / 'work').exists()  # nothing written before the refusal

    hggd, test_tool = os.path.join(REPO, 'configs', 'hggd_demo.py'), script_module('tools/test.py')
    with pytest.raises(SystemExit) as err:
        test_tool.main([hggd, 'epoch_6.pth', '--work-dir', str(tmp_path / 'work')])
    assert '\n' not in str(err.value) and 'test_dataloader.dataset.data_root' in str(err.value)
    # the root given on the command line is the one checked (and named)
    (tmp_path / 'data' / 'synthetic').mkdir(parents=True)
    with pytest.raises(SystemExit) as err:
        test_tool.main([hggd, 'epoch_6.pth', '--work-dir', str(tmp_path / 'work'),
                        '--cfg-options', 'test_evaluator.data_root=elsewhere'])
    assert 'data root elsewhere (test_evaluator.data_root)' in str(err.value)
    assert 'put the dataset there' in str(err.value)


def test_a_missing_graspclutter6d_demo_root_gets_its_own_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/synthetic_gc6d here
    config = os.path.join(REPO, 'configs', 'gsnet_gc6d_demo.py')
    with pytest.raises(SystemExit) as err:
        script_module('tools/test.py').main([config, 'epoch_6.pth', '--work-dir',
                                             str(tmp_path / 'work')])
    text = str(err.value)
    assert 'data root data/synthetic_gc6d' in text and '--layout graspclutter6d' in text
    assert '--camera realsense-d435' in text
