"""Every shipped recipe, as its config ships (frames from the frame store, the augmentation on
the device where the recipe takes it), against the reference paths (``source='files'``,
``apply='worker'``): the same batch after the data preprocessor and the same training step
(losses and every gradient), bit for bit, on GraspNet-1Billion and GraspClutter6D frames.
FineGrasp's normals, computed on the device as shipped, are computed in the workers there;
GraspNet-baseline's and Scale-Balanced-Grasp's visible-label test, run by the data preprocessor
as shipped, runs in the workers there (``visible_test='worker'``)."""
import copy
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate

from mmgrasp.apis import register_all_modules
from mmgrasp.datasets import GraspNetDataset
from mmgrasp.registry import MODELS, build_in_scope

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VIEWS = 5  # the session datasets' 5 x 3 x 3 grid
FRAMES = [(0, 1), (1, 4)]  # (epoch, index)
GSNET = dict(num_seeds=32, num_views=VIEWS, num_angles=3, num_depths=3,
             backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
             crop=dict(channels=(16, )), assigner=dict(num_views=VIEWS))
BASELINE = dict(num_views=VIEWS, num_angles=3, num_depths=3,
                backbone=dict(npoints=(128, 64, 32, 16), nsamples=(16, 8, 8, 8), scale=0.125),
                crop=dict(nsample=8, channels=(8, 8, 16), hmax=(0.01, 0.02, 0.03)),
                operation=dict(hidden=16), tolerance=dict(hidden=16),
                assigner=dict(num_views=VIEWS))
SCALE_BALANCED = dict(BASELINE, backbone=dict(npoints=(128, 64), nsamples=(16, 8), scale=0.125),
                      crop=dict(nsample=8, channels=(8, 16, 32), hmax=(0.01, 0.02, 0.03)),
                      assigner=dict(num_views=VIEWS, min_views=1, scale_statistic=dict(
                          interval=[0.0, 0.02, 0.04, 0.06, 0.08, 0.1], num=[1, 3, 5, 2, 1])))
# 12 angles and 4 depths stay: the assigner's unmatched defaults are classes of those heads
ECONOMIC = dict(num_seeds=32, num_views=VIEWS,
                backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), out_channels=16),
                crop=dict(channels=(16, ), channels2=(16, )), head=dict(embed_channels=8),
                assigner=dict(num_views=VIEWS))
FINEGRASP = dict(ECONOMIC, backbone=dict(channels=(8, 8, 8, 8, 8, 8, 8, 8), stem_channels=8,
                                         out_channels=16),
                 crop=dict(channels=(16, ), channels2=(16, ), fusion_heads=4,
                           fusion_feedforward=32))
RECIPES = {  # config: (layout, shrunk network, augmentation as shipped)
    'gsnet_demo.py': ('graspnet', GSNET, 'device'),
    'graspnet_baseline_demo.py': ('graspnet', BASELINE, 'device'),
    'scale_balanced_demo.py': ('graspnet', SCALE_BALANCED, 'device'),
    'economicgrasp_demo.py': ('graspnet', ECONOMIC, 'worker'),
    'finegrasp_demo.py': ('graspnet', FINEGRASP, 'device'),
    'gsnet_gc6d_demo.py': ('graspclutter6d', GSNET, 'device'),
}


def shrunk_pipeline(pipeline: list, reference: bool) -> list:
    """The shipped pipeline at the test data's size; ``reference`` sets the reference paths."""
    pipeline = copy.deepcopy(pipeline)
    for t in pipeline:
        if t['type'] == 'LoadGraspScene':
            t['num_points'] = 600
            if reference:
                t['source'] = 'files'
        elif t['type'] == 'SampleGraspLabels':
            t.update(min_points=10, min_object_points=20)
            if reference:
                t['visible_test'] = 'worker'
        elif t['type'] == 'LoadEconomicLabels':
            t['top_k'] = VIEWS
        elif t['type'] in ('RandomFlipRotateScene', 'EstimateNormals') and reference:
            t['apply'] = 'worker'
    return pipeline


def training_step(cfg: Config, shrink: dict, batch: list):
    merged = Config(dict(model=copy.deepcopy(cfg.model)))
    merged.merge_from_dict({'model': shrink})
    torch.manual_seed(0)
    model = build_in_scope(MODELS, merged.model)
    data = model.data_preprocessor(pseudo_collate(batch), True)
    losses = model(**data, mode='loss')
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    return data['inputs'], losses, {n: p.grad for n, p in model.named_parameters()
                                    if p.grad is not None}


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(RECIPES))
def test_shipped_recipe_equals_the_reference_paths(name, synthetic_root, gc6d_root):
    layout, shrink, apply = RECIPES[name]
    register_all_modules(False)
    cfg = Config.fromfile(os.path.join(REPO, 'configs', name))
    shipped = cfg.train_dataloader.dataset.pipeline
    load = next(t for t in shipped if t['type'] == 'LoadGraspScene')
    flip = next(t for t in shipped if t['type'] == 'RandomFlipRotateScene')
    assert load.get('source', 'frames') == 'frames' and flip.get('apply', 'worker') == apply
    root = synthetic_root if layout == 'graspnet' else gc6d_root
    steps = {}
    for reference in (False, True):
        dataset = GraspNetDataset(root, seed=cfg.train_dataloader.dataset.seed,
                                  layout=layout, camera=cfg.train_dataloader.dataset.camera,
                                  pipeline=shrunk_pipeline(shipped, reference))
        steps[reference] = training_step(cfg, shrink, [dataset[f] for f in FRAMES])
    (inputs, losses, grads), (ref_inputs, ref_losses, ref_grads) = steps[False], steps[True]
    assert all(torch.isfinite(v).all() for v in ref_losses.values()), ref_losses
    assert sum(float(v.detach()) for k, v in ref_losses.items() if 'loss' in k) > 0
    assert inputs.keys() == ref_inputs.keys()
    for key, value in ref_inputs.items():
        if key == 'grasp_labels':
            for field in ('points', 'poses', 'point_object', 'point_row', 'object_ids'):
                assert torch.equal(getattr(value, field), getattr(inputs[key], field)), field
        elif isinstance(value, torch.Tensor):
            assert torch.equal(value, inputs[key]), key
    assert losses.keys() == ref_losses.keys()
    for key in ref_losses:
        assert torch.equal(losses[key], ref_losses[key]), key
    assert grads.keys() == ref_grads.keys() and grads
    for key in ref_grads:
        assert torch.equal(grads[key], ref_grads[key]), key
