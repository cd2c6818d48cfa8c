"""A demo config shrunk for the inferencer tests, its initial weights and tools/test.py's dump
of them: what GraspInferencer must reproduce frame by frame."""
import os
import subprocess
import sys
from typing import Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')])}


def initial_weights_dump(tmp, name: str, text: str) -> Tuple[str, str, str]:
    """(config, checkpoint, dump) in folder ``tmp``: the config ``text`` as ``name``, the
    model's initial weights (seed 0) and tools/test.py's ``--dump-only`` of them."""
    import torch
    from mmengine.config import Config

    from mmgrasp.apis import register_all_modules
    from mmgrasp.registry import MODELS, build_in_scope
    config, checkpoint = str(tmp / name), str(tmp / 'init.pth')
    with open(config, 'w') as f:
        f.write(text)
    register_all_modules(False)
    torch.manual_seed(0)
    model = build_in_scope(MODELS, Config.fromfile(config).model)
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    dump = str(tmp / 'dump')
    out = subprocess.run([sys.executable, 'tools/test.py', config, checkpoint, '--dump-only',
                          '--dump', dump, '--work-dir', str(tmp / 'work')], cwd=REPO,
                         capture_output=True, text=True, timeout=600, env=ENV)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return config, checkpoint, dump
