"""GSNet, EconomicGrasp and FineGrasp share one seed stage (GraspnessSeedDetector): inherited,
not borrowed from a class the detector is not; it keeps the graspable rule (objectness argmax 1
and graspness above the threshold, every point while none is) checked here in numpy; and the
one hook a subclass changes, ``input_features``, reaches the backbone."""
import ast
import importlib
import inspect
import os

import numpy as np
import pytest
import torch

from mmgrasp.apis import register_all_modules
from mmgrasp.models.detectors import EconomicGrasp, FineGrasp, GSNet
from mmgrasp.models.detectors.graspness_seeds import GraspnessSeedDetector
from mmgrasp.ops.point_ops import furthest_point_sample
from mmgrasp.registry import MODELS, build_in_scope

register_all_modules(False)
DETECTORS = os.path.join(os.path.dirname(inspect.getfile(GSNet)))
BACKBONE = dict(type='SparseUNet14', channels=(8,) * 8, out_channels=16)


class PointBackbone(torch.nn.Module):
    """Per-point features standing in for the sparse U-Net (seconds a call here): the seed
    stage's rule does not depend on how the features were made."""

    out_channels = 16

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, self.out_channels)

    def forward(self, points, feats=None):
        return torch.sin(40 * self.linear(points if feats is None else feats)).transpose(1, 2)


@pytest.fixture(scope='module')
def model():
    torch.manual_seed(0)
    model = build_in_scope(MODELS, dict(type='GSNet', backbone=BACKBONE, num_seeds=16,
                                        crop=dict(channels=(16, )))).eval()
    model.backbone = PointBackbone()
    return model


def _cloud(num: int = 200) -> torch.Tensor:
    gen = torch.Generator().manual_seed(3)
    return torch.rand(2, num, 3, generator=gen) * torch.tensor([0.3, 0.3, 0.1]) + \
        torch.tensor([-0.15, -0.15, 0.4])


def test_the_three_detectors_inherit_one_seed_stage():
    for cls in (GSNet, EconomicGrasp, FineGrasp):
        assert issubclass(cls, GraspnessSeedDetector), cls
        for name in ('_seed_stage', '_views'):
            assert getattr(cls, name) is getattr(GraspnessSeedDetector, name), (cls, name)
    assert FineGrasp.input_features is not GraspnessSeedDetector.input_features


def _borrowed_methods(path: str) -> list:
    """``Other.method(self, ...)`` calls and ``name = Other.method`` class attributes where
    ``Other`` is a detector class that is not one of the enclosing class's bases."""
    module = importlib.import_module(f'mmgrasp.models.detectors.{os.path.basename(path)[:-3]}')
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if not isinstance(node, ast.ClassDef):
            continue
        mro = {c.__name__ for c in inspect.getmro(getattr(module, node.name))}
        for inner in ast.walk(node):
            method = None
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                    inner.args and isinstance(inner.args[0], ast.Name) and \
                    inner.args[0].id == 'self':
                method = inner.func
            elif isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Attribute):
                method = inner.value
            owner = getattr(method, 'value', None)
            if isinstance(owner, ast.Name) and inspect.isclass(getattr(module, owner.id, None)) \
                    and owner.id not in mro:
                found.append(f'{os.path.basename(path)}: {node.name} uses {owner.id}.'
                             f'{method.attr}')
    return found


def test_no_detector_borrows_a_method_of_a_class_it_is_not():
    paths = [os.path.join(DETECTORS, n) for n in sorted(os.listdir(DETECTORS))
             if n.endswith('.py') and n != '__init__.py']
    assert [f for p in paths for f in _borrowed_methods(p)] == []


def test_seeds_are_graspable_points(model, monkeypatch):
    """Seeds lie among the points the rule marks graspable (numpy, from the stage's own
    objectness and graspness); with a threshold nothing passes, among all points."""
    points = _cloud()
    with torch.no_grad():
        out = model._seed_stage({'points': points})
    objectness, graspness = out['objectness'].numpy(), out['graspness'].numpy()
    # half the points pass: the threshold at each batch's median graspness of objects
    monkeypatch.setattr(model, 'graspness_threshold',
                        float(np.median(graspness[objectness.argmax(1) == 1])))
    with torch.no_grad():
        out = model._seed_stage({'points': points})
    assert out['seeds'].shape == (2, 16, 3) and out['seed_features'].shape == (2, 16, 16)
    for b in range(2):
        mask = (objectness[b].argmax(0) == 1) & (graspness[b] > model.graspness_threshold)
        assert 16 <= mask.sum() < len(mask)
        chosen = [np.flatnonzero((points[b].numpy() == s).all(1))[0]
                  for s in out['seeds'][b].numpy()]
        assert mask[chosen].all(), f'frame {b}: a seed outside the graspable points'
    monkeypatch.setattr(model, 'graspness_threshold', float(graspness.max()) + 1)
    with torch.no_grad():
        none_pass = model._seed_stage({'points': points})
    every = furthest_point_sample(points, 16, torch.ones(points.shape[:2], dtype=torch.bool))
    assert torch.equal(none_pass['seeds'], torch.gather(points, 1, every[..., None].expand(
        -1, -1, 3)))
    assert all(len(np.unique(f, axis=0)) == 16 for f in none_pass['seeds'].numpy())


def test_input_features_reach_the_backbone(model, monkeypatch):
    """The subclass hook: what ``input_features`` returns is what the backbone reads."""
    points = _cloud()
    seen = []
    hook = model.backbone.register_forward_hook(lambda m, args, out: seen.append(args))
    features = torch.rand(2, points.shape[1], 3, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        with monkeypatch.context() as patch:
            patch.setattr(model, 'input_features', lambda inputs: features)
            fed = model._seed_stage({'points': points})
        ones = model._seed_stage({'points': points})
    hook.remove()
    assert torch.equal(seen[0][1], features) and len(seen[1]) == 1
    assert not torch.equal(fed['objectness'], ones['objectness'])
