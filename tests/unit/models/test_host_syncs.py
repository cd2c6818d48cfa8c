"""Host syncs of the training-side parts, counted as mmgrasp/analysis/dispatch_count.py counts
them: stacking the labels makes none, label matching on deferred labels one per gather (the
requests' transfer to the host, where the label store is read), the losses and the drawing of
views none — and the sync-free replacements compute what they replace."""
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from torch.profiler import ProfilerActivity, profile

from mmgrasp.analysis import dispatch_count as dispatch
from mmgrasp.models.assigners import NearestLabelAssigner, ScaleBalancedAssigner
from mmgrasp.models.assigners.nearest_label_assigner import log_ratio_decreasing
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.models.heads.gsnet_heads import ApproachHead
from mmgrasp.models.losses import GraspNetBaselineLoss, GSNetLoss, ScaleBalancedGraspLoss

V, A, D = 5, 3, 3  # tests/conftest.py SMALL_GRID
NUM_SEEDS = 40
STATISTIC = dict(interval=torch.linspace(0.003, 0.1, 33).tolist(),
                 num=[float(n) for n in range(1, 33)])
ASSIGNERS = dict(
    gsnet=lambda: NearestLabelAssigner(num_views=V),
    bl=lambda: NearestLabelAssigner(num_views=V, all_view_widths=True, with_tolerance=True,
                                    view_graspness=False, gsnet_score_norm=False),
    sbg=lambda: ScaleBalancedAssigner(num_views=V, min_views=1, scale_statistic=STATISTIC))


def _syncs(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    return sum(p['syncs'] for p in dispatch.count_events(prof.events()).values())


@pytest.fixture(scope='module')
def batch(make_dataset):
    dataset = make_dataset('deferred', num_points=600, tolerance=True)
    data = pseudo_collate([dataset[i] for i in (0, 4)])
    inputs = GraspDataPreprocessor()(data, training=True)['inputs']
    g = torch.Generator().manual_seed(0)
    points = inputs['points']
    index = torch.stack([torch.randperm(points.shape[1], generator=g)[:NUM_SEEDS]
                         for _ in range(len(points))])
    seeds = torch.gather(points, 1, index[..., None].expand(-1, -1, 3))
    top_view = torch.randint(0, V, (len(points), NUM_SEEDS), generator=g)
    return data, inputs, seeds, top_view


def test_stacking_labels_makes_no_sync(batch):
    data = batch[0]
    preprocessor = GraspDataPreprocessor()
    assert _syncs(lambda: preprocessor(data, training=True)) == 0


@pytest.mark.parametrize('recipe', list(ASSIGNERS))
def test_label_matching_syncs_once_per_gather(batch, recipe):
    """Stage one reads per-view summaries, stage two the chosen view's cells: two gathers, two
    host reads of the requests, nothing else (no unique/nonzero/item on the way)."""
    _, inputs, seeds, top_view = batch
    labels = inputs['grasp_labels']
    assigner = ASSIGNERS[recipe]()
    assert assigner._reads_summaries(labels)

    def run():
        matched = assigner.assign(seeds, labels)
        return assigner.match_view(matched, top_view, labels)

    run()  # the read buffer grows to this batch's size (its numpy view is made then)
    assert _syncs(run) == 2


@pytest.mark.parametrize('recipe', list(ASSIGNERS))
def test_losses_make_no_sync(batch, recipe):
    _, inputs, seeds, top_view = batch
    labels = inputs['grasp_labels']
    assigner = ASSIGNERS[recipe]()
    matched = assigner.match_view(assigner.assign(seeds, labels), top_view, labels)
    g = torch.Generator().manual_seed(1)
    B, N = inputs['points'].shape[:2]

    def randn(*shape):
        return torch.randn(*shape, generator=g).requires_grad_()

    if recipe == 'gsnet':
        args = (randn(B, 2, N), randn(B, N), inputs['objectness'], inputs['graspness'],
                randn(B, NUM_SEEDS, V), randn(B, NUM_SEEDS, A, D), randn(B, NUM_SEEDS, A, D))
        loss = GSNetLoss()
    else:
        on_object = (torch.rand(B, NUM_SEEDS, generator=g) > 0.5).long()
        args = (randn(B, 2, NUM_SEEDS), on_object, randn(B, NUM_SEEDS, V),
                *(randn(B, A, NUM_SEEDS, D) for _ in range(4)))
        loss = GraspNetBaselineLoss() if recipe == 'bl' else ScaleBalancedGraspLoss()
    assert _syncs(lambda: sum(loss(*args, matched).values()).backward()) == 0


def test_drawn_views_are_multinomials_without_a_sync():
    scores = torch.randn(3, 50, V, generator=torch.Generator().manual_seed(2))
    scores[1, 7] = 0.5  # a constant row: every view equally likely
    drawn = ApproachHead.choose_views(scores, torch.Generator().manual_seed(3))
    low, high = scores.amin(-1, keepdim=True), scores.amax(-1, keepdim=True)
    weights = ((scores - low) / (high - low + 1e-8)).reshape(-1, V)
    weights = torch.where(weights.sum(-1, keepdim=True) > 0, weights, torch.ones_like(weights))
    want = torch.multinomial(weights, 1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(drawn, want.view(3, 50))
    assert _syncs(lambda: ApproachHead.choose_views(scores, torch.Generator().manual_seed(3))) == 0


def test_log_ratio_check_refuses_neighbouring_values():
    """ln(1 / μ) of two adjacent float32 μ differ by about two ulp: a device's log may tie
    them, so the summaries are not used; GraspNet's μ steps (0.1) are far apart."""
    steps = np.array([-1, 0, 0.1, 0.2, 0.5, 1.0], dtype=np.float32)
    assert log_ratio_decreasing(steps)
    close = np.append(steps, np.nextafter(np.float32(0.5), np.float32(1)))
    assert not log_ratio_decreasing(close)
    assert log_ratio_decreasing(np.zeros(256, dtype=np.float32))
