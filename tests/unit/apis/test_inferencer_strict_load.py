"""GraspInferencer and the demo refuse a checkpoint of another model with tools/test.py's strict
message (not mmengine's multi-kilobyte RuntimeError), naming the method its meta says it is."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config

from mmgrasp.apis import GraspInferencer
from mmgrasp.engine.hooks.config_hash_hook import config_hash
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.apis import register_all_modules
from mmgrasp.utils.checkpoint_keys import CheckpointMismatchError, check_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GSNET = os.path.join(REPO, 'configs', 'gsnet_demo.py')
BASELINE = os.path.join(REPO, 'configs', 'graspnet_baseline_demo.py')


@pytest.fixture(scope='module')
def gsnet_checkpoint(tmp_path_factory) -> str:
    """The GSNet demo's initial weights with the meta ConfigHashHook writes (hashed_config)."""
    register_all_modules(False)
    cfg = Config.fromfile(GSNET)
    torch.manual_seed(0)
    state = build_in_scope(MODELS, cfg.model).state_dict()
    path = str(tmp_path_factory.mktemp('strict') / 'gsnet_demo.pth')
    digest, text = config_hash(cfg)
    torch.save({'state_dict': state, 'meta': {'config_hash': digest, 'hashed_config': text}},
               path)
    return path


def test_inferencer_refuses_with_the_strict_message_and_the_method(gsnet_checkpoint):
    with pytest.raises(CheckpointMismatchError) as info:
        GraspInferencer(BASELINE, gsnet_checkpoint)
    text = str(info.value)
    assert text.startswith(f'{gsnet_checkpoint} does not fit the model (GraspNetBaseline); a '
                           f'strict load refuses it')
    assert 'missing keys (the model has them, the checkpoint does not): backbone.sa.0' in text
    assert 'its meta says it is a GSNet (backbone SparseUNet14) checkpoint: use the config it ' \
           'was trained with' in text
    assert len(text) < 2500


@pytest.mark.slow
def test_demo_exits_with_the_message_not_a_traceback(gsnet_checkpoint, tmp_path):
    depth = np.full((40, 50), 600, np.uint16)
    import cv2
    cv2.imwrite(str(tmp_path / 'depth.png'), depth)
    np.save(tmp_path / 'K.npy', np.array([[60.0, 0, 25], [0, 60, 20], [0, 0, 1]]))
    out = subprocess.run([sys.executable, 'demo/grasp_demo.py', str(tmp_path / 'depth.png'),
                          '--intrinsics', str(tmp_path / 'K.npy'), '--config', BASELINE,
                          '--checkpoint', gsnet_checkpoint, '--all-readings',
                          '--out', str(tmp_path / 'out.png')], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**os.environ, 'PYTHONPATH': REPO})
    assert out.returncode == 1, out.stderr[-2000:]
    assert out.stderr.startswith(f'error: {gsnet_checkpoint} does not fit the model '
                                 f'(GraspNetBaseline)'), out.stderr[-2000:]
    assert 'its meta says it is a GSNet' in out.stderr and 'Traceback' not in out.stderr
    assert len(out.stderr) < 2500 and not os.path.exists(tmp_path / 'out.png')


def test_the_method_named_for_each_kind_of_meta(gsnet_checkpoint):
    register_all_modules(False)
    model = build_in_scope(MODELS, Config.fromfile(BASELINE).model)
    state = torch.load(gsnet_checkpoint, weights_only=True)['state_dict']
    for meta, named in [({'method': 'gsnet', 'config': 'configs/gsnet_deferred.py'},
                         'its meta says it is a gsnet (converted for configs/gsnet_deferred.py) '
                         'checkpoint'),
                        ({}, None), ({'hashed_config': 'not json'}, None),
                        ({'hashed_config': '{"model": {"type": 3}}'}, None)]:
        with pytest.raises(CheckpointMismatchError) as info:
            check_checkpoint(model, {'state_dict': state, 'meta': meta}, 'ckpt')
        if named:
            assert named in str(info.value)
        else:
            assert 'meta says' not in str(info.value)
