"""Every loss term of the shipped recipes (GSNet, GraspNet-baseline, Scale-Balanced-Grasp, with
the weights of their configs), computed on mmgrasp's matched labels of a synthetic batch (dense
and deferred grids), equals a plain numpy port of the reference losses computed on the
reference labels from the raw files (``_reference_labels``), for the same predictions. The
mutants these comparisons catch are listed in test_assigners_reference.py."""
import pytest

import _reference_checks as checks
from mmgrasp.apis import register_all_modules


@pytest.fixture(scope='module', autouse=True)
def _registered():
    register_all_modules()


@pytest.mark.parametrize('grids', ('dense', 'deferred'))
@pytest.mark.parametrize('method', sorted(checks.RECIPES))
def test_loss_terms_equal_reference(synthetic_root, method, grids):
    losses = checks.check_losses(synthetic_root, method, grids)
    # every term is live: its mask selects something, so a wrong mask or scale shows
    assert all(v > 0 for v in losses.values()), losses
