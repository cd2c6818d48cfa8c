"""env_cfg.num_threads: the tools pin torch's thread count to it (the demo configs set 2, so a
demo repeats to the bit on the same kind of CPU); a count that is not a positive integer is
refused naming the key; without it torch keeps its default."""
import pytest
import torch
from mmengine.config import Config

from mmgrasp.apis.cli import apply_num_threads


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_count_is_applied(threads):
    before = torch.get_num_threads()
    assert apply_num_threads(Config(dict(env_cfg=dict(num_threads=1))), 'c.py') == 1
    assert torch.get_num_threads() == 1
    torch.set_num_threads(before)
    assert apply_num_threads(Config(dict(env_cfg=dict(mp_cfg={}))), 'c.py') is None
    assert apply_num_threads(Config(dict()), 'c.py') is None
    assert torch.get_num_threads() == before


@pytest.mark.parametrize('value', [0, -2, '2', 1.5, True])
def test_a_bad_count_is_refused(threads, value):
    before = torch.get_num_threads()
    with pytest.raises(SystemExit, match=rf'c\.py: env_cfg\.num_threads={value!r}: expected a '
                                         rf'positive integer'):
        apply_num_threads(Config(dict(env_cfg=dict(num_threads=value))), 'c.py')
    assert torch.get_num_threads() == before


def test_the_demo_configs_pin_two_threads():
    import glob
    import os
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    demos = sorted(glob.glob(os.path.join(repo, 'configs', '*demo*.py')))
    assert len(demos) >= 7
    for path in demos:
        assert Config.fromfile(path).env_cfg.get('num_threads') == 2, path
