"""Whole trainings through tools/train.py for the identity tests: every iteration's loss terms
are recorded (:class:`RecordLosses`, imported by the run's config through ``custom_imports``,
PYTHONPATH=tests/integration) and checked for finiteness before anything is compared, so a
diverging run fails as "loss became non-finite at iteration N", not as "weights differ"."""
import json
import math
import os
import subprocess
import sys
from typing import List, Optional, Tuple

import pytest
import torch
from mmengine.hooks import Hook

from mmgrasp.registry import HOOKS

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LOSSES = 'losses.jsonl'
#: Appended to a test config: record the losses, keep the config hash check.
RECORDING = """
custom_imports = dict(imports=['_whole_training'], allow_failed_imports=False)
custom_hooks = [dict(type='ConfigHashHook'), dict(type='RecordLosses')]
"""


@HOOKS.register_module(force=True)
class RecordLosses(Hook):
    """One JSON line per iteration in ``<work_dir>/losses.jsonl``: the 1-based iteration and
    every logged loss term. Priority HIGHEST: written before InvalidLossHook may stop the run."""

    priority = 'HIGHEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        terms = {key: float(value) for key, value in (outputs or {}).items()}
        with open(os.path.join(runner.work_dir, LOSSES), 'a') as f:
            f.write(json.dumps(dict(iter=runner.iter + 1, **terms)) + '\n')


@HOOKS.register_module(force=True)
class RecordThreads(Hook):
    """``<work_dir>/threads.txt``: torch's intra-op thread count while the run trains (what
    the config's ``env_cfg.num_threads`` pins)."""

    def before_train(self, runner) -> None:
        with open(os.path.join(runner.work_dir, 'threads.txt'), 'w') as f:
            f.write(str(torch.get_num_threads()))


def read_losses(work_dir: str) -> List[dict]:
    """The recorded iterations of a run, in order (empty when none finished)."""
    path = os.path.join(work_dir, LOSSES)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


def first_non_finite(records: List[dict]) -> Optional[Tuple[int, dict]]:
    """(iteration, its terms) of the first record with a non-finite term, or None."""
    for record in records:
        terms = {k: v for k, v in record.items() if k != 'iter'}
        if not all(math.isfinite(v) for v in terms.values()):
            return record['iter'], terms
    return None


def run_train(config: str, work_dir: str, *extra: str) -> subprocess.CompletedProcess:
    """tools/train.py with this folder on the path (for ``custom_imports``)."""
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([HERE, REPO, os.environ.get('PYTHONPATH', '')]))
    return subprocess.run([sys.executable, 'tools/train.py', config, '--work-dir', work_dir,
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=1500,
                          env=env)


def train(config: str, work_dir: str, *extra: str, iterations: Optional[int] = None
          ) -> List[dict]:
    """Run tools/train.py; fail on the first non-finite loss (with its iteration and terms),
    then on a failed run; return the recorded losses (checked to cover ``iterations``)."""
    out = run_train(config, work_dir, *extra)
    records = read_losses(work_dir)
    bad = first_non_finite(records)
    if bad is not None:
        pytest.fail(f'{os.path.basename(work_dir)}: loss became non-finite at iteration '
                    f'{bad[0]}: {bad[1]}')
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    if iterations is not None:
        assert records and records[-1]['iter'] == iterations, records[-1:]
    return records


def final_state(work_dir: str, iterations: int) -> dict:
    # weights_only=False: the test's own file; an SBG checkpoint holds mmengine's
    # OneCycleParamScheduler, which torch's weights-only unpickler refuses
    checkpoint = torch.load(os.path.join(work_dir, f'iter_{iterations}.pth'),
                            map_location='cpu', weights_only=False)
    assert checkpoint['meta']['iter'] == iterations
    return checkpoint


def assert_same(a, b, path=''):
    """Bit-identical nested states (tensors with torch.equal), naming the first difference."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_same(a[key], b[key], f'{path}.{key}')
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f'{path}[{i}]')
    else:
        assert a == b, path


def assert_finite_state(state: dict, name: str) -> None:
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    assert not bad, f'{name}: non-finite weights {bad[:5]}'
