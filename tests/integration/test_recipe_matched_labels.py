"""Three batches of each shipped recipe (GSNet, GraspNet-baseline, Scale-Balanced-Grasp data
pipelines and assigners, as their configs define them): every MatchedLabels tensor is
identical between dense and deferred grids, frames with one object model twice included."""
import copy
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.models.assigners import compute_scale_statistic
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.registry import TASK_UTILS, build_in_scope
from mmgrasp.structures.matched_labels import GRID_FIELDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = [[(0, 0), (0, 1)], [(1, 2), (0, 2)], [(1, 3), (1, 4)]]  # scene 0 holds a model twice
RECIPES = ['gsnet_deferred.py', 'graspnet_baseline_deferred.py', 'scale_balanced_deferred.py']


def recipe_dataset(cfg: Config, root: str, grids: str) -> GraspNetDataset:
    pipeline = copy.deepcopy(cfg.train_dataloader.dataset.pipeline)
    for t in pipeline:
        if t['type'] == 'LoadGraspScene':
            t['num_points'] = 1500  # the synthetic test frames are 320x180
        if t['type'] == 'SampleGraspLabels':
            t.update(grids=grids, min_object_points=20)
    return GraspNetDataset(root, pipeline=pipeline, seed=cfg.train_dataloader.dataset.seed)


def assert_matched_identical(dense, deferred, context, device: str = 'cpu') -> None:
    """Every field of the deferred MatchedLabels equals the dense one's, on ``device``; the grid
    fields are absent on the deferred side (its labels are matched through summaries)."""
    for (name, a), (_, b) in zip(dense.items(), deferred.items()):
        if name in GRID_FIELDS:
            assert b is None, name
            continue
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.device.type == device and torch.equal(a, b), (*context, name)


@pytest.mark.parametrize('recipe', RECIPES)
def test_recipe_matched_labels_identical(synthetic_root, recipe):
    cfg = Config.fromfile(os.path.join(REPO, 'configs', recipe))
    assigner_cfg = dict(cfg.model.assigner, num_views=5)  # the test grid is 5 x 3 x 3
    datasets = {g: recipe_dataset(cfg, synthetic_root, g) for g in ('dense', 'deferred')}
    assigner = build_in_scope(TASK_UTILS, assigner_cfg)
    if hasattr(assigner, 'set_scale_statistic'):
        statistics = [compute_scale_statistic(d, num_frames=6) for d in datasets.values()]
        assert statistics[0] == statistics[1]
        assigner.set_scale_statistic(dict(statistics[0],
                                          num=[n + 1 for n in statistics[0]['num']]))
    generator = torch.Generator().manual_seed(1)
    for frames in BATCHES:
        matched = {}
        seeds = top_view = None
        for grids, dataset in datasets.items():
            data = GraspDataPreprocessor()(pseudo_collate([dataset[f] for f in frames]), True)
            inputs = data['inputs']
            if seeds is None:
                index = torch.randint(0, inputs['points'].shape[1], (len(frames), 96),
                                      generator=generator)
                seeds = torch.gather(inputs['points'], 1, index[..., None].expand(-1, -1, 3))
                top_view = torch.randint(0, 5, (len(frames), 96), generator=generator)
            labels = inputs['grasp_labels']
            result = assigner.assign(seeds, labels)
            matched[grids] = assigner.match_view(result, top_view, labels)
        assert_matched_identical(matched['dense'], matched['deferred'], (recipe, frames))
        assert matched['deferred'].valid.all()
