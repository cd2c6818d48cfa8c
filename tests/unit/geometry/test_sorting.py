"""Tie orders: numpy 1.23's argsort and libstdc++'s std::sort (grasp_nms), against orders
recorded in graspnetAPI's own environment (tests/data/eval_sort_orders/make_orders.py)."""
import json
import os

import numpy as np

from mmgrasp.geometry.sorting import legacy_numpy_argsort, std_sort_descending

ORDERS = os.path.join(os.path.dirname(__file__), '..', '..', 'data', 'eval_sort_orders',
                      'orders.json')


def test_tie_orders_equal_the_recorded_ones():
    with open(ORDERS) as f:
        cases = json.load(f)
    assert len(cases) >= 20
    for case in cases:
        s = np.array(case['s'])
        assert legacy_numpy_argsort(s).tolist() == case['a1'], len(s)
        assert legacy_numpy_argsort(-s).tolist() == case['a2'], len(s)
        assert std_sort_descending(s).tolist() == case['nms'], len(s)


def test_orders_are_sorts():
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 15, 16, 17, 100, 501):
        s = rng.integers(0, 3, n) * 0.1
        a = legacy_numpy_argsort(s)
        assert sorted(a.tolist()) == list(range(n)) and np.all(np.diff(s[a]) >= 0)
        d = std_sort_descending(s)
        assert sorted(d.tolist()) == list(range(n)) and np.all(np.diff(s[d]) <= 0)
