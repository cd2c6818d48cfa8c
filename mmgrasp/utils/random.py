"""Per-sample random streams.

Every random draw of a sample (point sampling, label-point sampling, augmentation) comes from one
generator derived from (seed, epoch, index) alone. A sample therefore does not depend on which
worker loads it, how many workers there are, whether they persist, or whether the run was resumed.
"""
import operator

import numpy as np


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator of sample ``index`` in ``epoch`` of a run seeded ``seed``.

    ``np.random.default_rng([seed, epoch, index])``: numpy's SeedSequence mixes the three
    entropy words, so neighbouring indices or epochs give independent streams.
    """
    words = [operator.index(v) for v in (seed, epoch, index)]
    if min(words) < 0:
        raise ValueError(f'sample_rng needs non-negative seed, epoch and index, got {tuple(words)}')
    return np.random.default_rng(words)
