"""env_cfg.num_threads: the tools pin torch's thread count to it (the demo configs set 1, so a
demo repeats to the bit on the same kind of CPU); a count that is not a positive integer is
refused naming the key; without it torch keeps its default; the caller's count comes back
after the pinned block."""
import pytest
import torch
from mmengine.config import Config

from mmgrasp.apis.cli import config_num_threads, pinned_threads


def test_the_count_is_applied_and_restored():
    before = torch.get_num_threads()
    assert config_num_threads(Config(dict(env_cfg=dict(num_threads=1))), 'c.py') == 1
    with pinned_threads(1):
        assert torch.get_num_threads() == 1
        with pinned_threads(None):
            assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), pinned_threads(1):
        raise RuntimeError('the block failed')
    assert torch.get_num_threads() == before
    assert config_num_threads(Config(dict(env_cfg=dict(mp_cfg={}))), 'c.py') is None
    assert config_num_threads(Config(dict()), 'c.py') is None


@pytest.mark.parametrize('value', [0, -2, '2', 1.5, True])
def test_a_bad_count_is_refused(value):
    with pytest.raises(SystemExit, match=rf'c\.py: env_cfg\.num_threads={value!r}: expected a '
                                         rf'positive integer'):
        config_num_threads(Config(dict(env_cfg=dict(num_threads=value))), 'c.py')


def test_the_demo_configs_pin_one_thread():
    import glob
    import os
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    demos = sorted(glob.glob(os.path.join(repo, 'configs', '*demo*.py')))
    assert len(demos) >= 7
    for path in demos:
        assert Config.fromfile(path).env_cfg.get('num_threads') == 1, path
