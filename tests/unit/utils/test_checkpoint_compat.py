"""The checkpoint allow-list costs ``import mmgrasp`` no mmengine.optim: data tools that never
touch an optimizer start without torch.distributed's optimizers (loading checkpoints with it:
tests/integration/test_runner_resume.py)."""
import subprocess
import sys

from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

from mmgrasp.utils.checkpoint_compat import _ONE_CYCLE, MMENGINE_SAFE_GLOBALS


def test_import_mmgrasp_leaves_mmengine_optim_unimported():
    code = ('import sys, mmgrasp.datasets.graspness; '
            'print(sorted(m for m in sys.modules if m.startswith(("mmengine.optim", '
            '"torch.distributed.optim"))))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == '[]', out.stdout


def test_one_cycle_token_names_the_real_class():
    assert _ONE_CYCLE.cls is OneCycleParamScheduler
    assert (_ONE_CYCLE, f'{OneCycleParamScheduler.__module__}.'
                        f'{OneCycleParamScheduler.__qualname__}') in MMENGINE_SAFE_GLOBALS
