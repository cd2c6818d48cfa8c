"""Dense and deferred grids are identical on CUDA too: every MatchedLabels tensor of each shipped
recipe, and one training step of each demo model (losses and every gradient, bit for bit, under
``torch.use_deterministic_algorithms``). The CPU versions are test_recipe_matched_labels and
test_gsnet_training_identity; these run where a GPU is (tools/analysis/device_check.sh).

Operations without a deterministic CUDA implementation only warn here (``warn_only=True``):
which ones did is printed, so the device check's log names them."""
import os
import warnings

import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from test_amp_training import SHRINK, amp_config
from test_recipe_matched_labels import (BATCHES, RECIPES, REPO, assert_matched_identical,
                                        recipe_dataset)

from mmgrasp.models.assigners import compute_scale_statistic
from mmgrasp.registry import DATASETS, MODELS, TASK_UTILS, build_in_scope

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')]


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch):
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', os.environ.get('CUBLAS_WORKSPACE_CONFIG',
                                                                 ':4096:8'))
    torch.use_deterministic_algorithms(True, warn_only=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        yield
    torch.use_deterministic_algorithms(False)
    names = sorted({str(w.message).split('\n')[0][:120] for w in caught
                    if 'deterministic' in str(w.message)})
    if names:
        print('operations without a deterministic CUDA implementation:', *names, sep='\n  ')


def _with_statistic(assigner, datasets) -> None:
    if hasattr(assigner, 'set_scale_statistic'):
        statistics = [compute_scale_statistic(d, num_frames=6) for d in datasets]
        assert statistics[0] == statistics[1]
        assigner.set_scale_statistic(dict(statistics[0],
                                          num=[n + 1 for n in statistics[0]['num']]))


@pytest.mark.parametrize('recipe', RECIPES)
def test_recipe_matched_labels_identical_on_cuda(synthetic_root, recipe):
    cfg = Config.fromfile(os.path.join(REPO, 'configs', recipe))
    datasets = {g: recipe_dataset(cfg, synthetic_root, g) for g in ('dense', 'deferred')}
    assigner = build_in_scope(TASK_UTILS, dict(cfg.model.assigner, num_views=5))
    _with_statistic(assigner, datasets.values())
    preprocessor = build_in_scope(MODELS, dict(type='GraspDataPreprocessor')).cuda()
    generator = torch.Generator().manual_seed(1)
    for frames in BATCHES:
        matched, seeds, top_view = {}, None, None
        for grids, dataset in datasets.items():
            inputs = preprocessor(pseudo_collate([dataset[f] for f in frames]), True)['inputs']
            assert inputs['points'].is_cuda
            if seeds is None:
                index = torch.randint(0, inputs['points'].shape[1], (len(frames), 96),
                                      generator=generator).cuda()
                seeds = torch.gather(inputs['points'], 1, index[..., None].expand(-1, -1, 3))
                top_view = torch.randint(0, 5, (len(frames), 96), generator=generator).cuda()
            labels = inputs['grasp_labels']
            matched[grids] = assigner.match_view(assigner.assign(seeds, labels), top_view,
                                                 labels)
        assert_matched_identical(matched['dense'], matched['deferred'], (recipe, frames),
                                 device='cuda')


@pytest.mark.parametrize('name', sorted(SHRINK))
def test_training_step_identical_on_cuda(synthetic_root, tmp_path, name):
    results = {}
    for grids in ('dense', 'deferred'):
        cfg = Config.fromfile(amp_config(tmp_path, name, synthetic_root, grids=grids))
        dataset = DATASETS.build(dict(cfg.train_dataloader.dataset, _scope_='mmgrasp'))
        torch.manual_seed(0)
        model = build_in_scope(MODELS, cfg.model).cuda()
        if hasattr(model.assigner, 'set_scale_statistic'):
            _with_statistic(model.assigner, [dataset, dataset])
        data = model.data_preprocessor(pseudo_collate([dataset[0], dataset[4]]), True)
        losses = model(**data, mode='loss')
        assert all(torch.isfinite(v).all() for v in losses.values()), losses
        sum(losses.values()).backward()
        results[grids] = losses, {n: p.grad for n, p in model.named_parameters()
                                  if p.grad is not None}
    (loss_a, grad_a), (loss_b, grad_b) = results['dense'], results['deferred']
    assert loss_a.keys() == loss_b.keys() and grad_a.keys() == grad_b.keys() and grad_a
    for key in loss_a:
        assert torch.equal(loss_a[key], loss_b[key]), key
    for key in grad_a:
        assert grad_a[key].is_cuda and torch.equal(grad_a[key], grad_b[key]), key
