"""Tie orders of numpy 1.23's np.argsort and grasp_nms's std::sort on scores with many ties.

Run in graspnetAPI's environment (tools/analysis/golden/setup_graspnetapi_env.sh), from the
repository root:
    GRASPNETAPI_VENV/bin/python tests/data/eval_sort_orders/make_orders.py \
        tests/data/eval_sort_orders/orders.json
"""
import json
import sys

import numpy as np
from grasp_nms import nms_grasp

rng = np.random.default_rng(1)
out = []
for n in [5, 16, 17, 30, 64, 200, 700]:
    for trial in range(3):
        s = rng.integers(0, 4, n).astype(np.float64) * 0.1
        # grasp_nms's order: grasps 1 m apart, so none is suppressed; translation x = index
        g = np.zeros((n, 17))
        g[:, 0], g[:, 4:13], g[:, 13] = s, np.eye(3).reshape(-1), np.arange(n) * 1.0
        kept = nms_grasp(g, 0.03, 30 / 180 * np.pi)
        out.append(dict(s=s.tolist(), a1=np.argsort(s).tolist(), a2=np.argsort(-s).tolist(),
                        nms=kept[:, 13].astype(int).tolist()))
with open(sys.argv[1], 'w') as f:
    json.dump(out, f)
print(np.__version__, len(out))
