"""The graspnetAPI golden module fails when GraspNetMetric cannot be imported: a skip would turn
a broken metric into a green run."""
import os
import subprocess
import sys

import pytest

GOLDEN_TEST = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'test_graspnetapi_golden.py')
_RUN = """
import sys
sys.modules['mmgrasp.evaluation.metrics.graspnet_metric'] = None  # import raises ImportError
import pytest
sys.exit(pytest.main(['-q', '--noconftest', '-p', 'no:cacheprovider', '--collect-only',
                      sys.argv[1]]))
"""


@pytest.mark.slow
def test_golden_module_errors_instead_of_skipping():
    out = subprocess.run([sys.executable, '-c', _RUN, GOLDEN_TEST], capture_output=True,
                         text=True, cwd=os.path.dirname(GOLDEN_TEST), timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 2, f'exit {out.returncode} (5 = skipped/no tests):\n{text[-2000:]}'
    assert 'ImportError' in text or 'ModuleNotFoundError' in text, text[-2000:]
    assert 'skipped' not in text, text[-2000:]
