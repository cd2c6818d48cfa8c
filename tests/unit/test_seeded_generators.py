"""tests/conftest.py seeds the global generators before every test and before the wider-scoped
fixtures it sets up: a draw without a generator of its own is the same whichever tests ran
before it in the process."""
import random

import numpy as np
import pytest
import torch


@pytest.fixture(scope='module')
def module_draw():
    return torch.rand(3)


def test_a_module_fixture_draws_from_seed_0(module_draw):
    assert torch.equal(module_draw, torch.rand(3, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize('drawn_before', [0, 5])
def test_each_test_starts_from_seed_0(drawn_before):
    """Run twice in one process, the second time after draws of the first: same values."""
    torch_first = torch.rand(3)
    numpy_first = np.random.rand(3)
    python_first = random.random()
    assert torch.equal(torch_first, torch.rand(3, generator=torch.Generator().manual_seed(0)))
    assert np.array_equal(numpy_first, np.random.RandomState(0).rand(3))
    assert python_first == random.Random(0).random()
    for _ in range(drawn_before):  # left for the next test
        torch.rand(10), np.random.rand(10), random.random()
