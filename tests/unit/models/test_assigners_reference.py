"""Every MatchedLabels field of the shipped recipes' assigners (GSNet, GraspNet-baseline,
Scale-Balanced-Grasp; dense and deferred grids) equals a plain numpy reference written from the
published rules and reading the raw files (``_reference_labels``); ``collision='mask'`` gives
the targets of ``'zero_scores'``; and formula mutants of the assigners, the label store and the
losses are caught by these comparisons (``test_mutations_are_caught``, on the dataset copy whose
duplicated instances collide differently, ``distinct_instances_root``)."""
import importlib
import inspect
import textwrap

import numpy as np
import pytest
import torch

import _reference_checks as checks
from mmgrasp.storage.labels.store import LabelStore
from mmgrasp.models.assigners import compute_scale_statistic
from mmgrasp.apis import register_all_modules

GRIDS = ('dense', 'deferred')


@pytest.fixture(scope='module', autouse=True)
def _registered():
    register_all_modules()


@pytest.mark.parametrize('grids', GRIDS)
@pytest.mark.parametrize('method', sorted(checks.RECIPES))
def test_matched_labels_equal_reference(synthetic_root, method, grids):
    matched, ref, batch = checks.check_assigner(synthetic_root, method, grids)
    # the comparison is not vacuous: positives at the chosen views, flipped poses, the duplicated
    # model's two instances both matched
    assert (ref['top_scores'] > 0).any()
    top = batch['top_view'].numpy()[..., None, None, None]
    top_mu = np.take_along_axis(ref['scores'], top, 2)[:, :, 0]
    assert ((top_mu > 0) & (ref['top_widths'] > 0.1)).any()  # the width mask matters
    assert any(np.linalg.det(m) < 0 for m in batch['aug'])
    frames = checks.raw_frames(synthetic_root, batch)
    assert any(o.collision.any() for f in frames for o in f)
    objects = [o for f in frames for o in f]
    twice = {(b, o.object_id) for b, f in enumerate(frames) for o in f
             if sum(p.object_id == o.object_id for p in f) > 1}
    assert twice
    matched_instances = {(b, objects[k].object_id, objects[k].instance)
                         for b in range(len(frames)) for k in ref['object_index'][b].tolist()}
    assert any(sum(1 for m in matched_instances if m[:2] == key) == 2 for key in twice)
    if method == 'sbg':
        assert ref['robust_graspable'].any() and not ref['robust_graspable'].all()
        assert len(np.unique(ref['scale_weight'])) > 1


@pytest.mark.slow
@pytest.mark.parametrize('grids', GRIDS)
@pytest.mark.parametrize('method', ['gsnet', 'bl'])
def test_collision_mask_gives_zero_scores_targets(synthetic_root, method, grids):
    """``collision='mask'``: the assigner writes the mask into μ (and tolerance) where it
    matches the labels, so every target equals ``'zero_scores'``'s; the mask itself stays
    available in ``MatchedLabels.collision``; ``'none'`` differs where grasps collide."""
    results = {}
    for mode in ('zero_scores', 'mask', 'none'):
        batch = checks.load_batch(checks.recipe_dataset(synthetic_root, method, grids, mode))
        results[mode] = checks.run_assigner(method, batch)
        if mode == 'mask':
            ref = checks.run_reference(method, synthetic_root, batch, results[mode], mode)
            checks.compare_fields(results[mode], ref, f'{method} {grids} mask')
    masked, zeroed, none = results['mask'], results['zero_scores'], results['none']
    if masked.scores is not None:  # grids; the matched-cell path of deferred labels has none
        assert masked.collision is not None and masked.collision.any()
        assert not torch.equal(masked.scores, none.scores)
    else:
        assert grids == 'deferred' and masked.collision is None
    assert zeroed.collision is None and none.collision is None
    for (name, a), (_, b) in zip(masked.items(), zeroed.items()):
        if name != 'collision':
            assert (a is None) == (b is None), name
            assert a is None or torch.equal(a, b), name
    assert not torch.equal(masked.top_scores, none.top_scores)
    if method == 'gsnet':
        assert not torch.equal(masked.view_graspness, none.view_graspness)
    else:
        assert not torch.equal(masked.view_labels, none.view_labels)


def test_collision_mask_in_scale_statistic(synthetic_root):
    """The scale statistic counts best grasps of 'mask' labels as of 'zero_scores' labels."""
    stats = {mode: compute_scale_statistic(checks.recipe_dataset(synthetic_root, 'sbg',
                                                                  'deferred', mode), 3)
             for mode in ('zero_scores', 'mask', 'none')}
    assert stats['mask'] == stats['zero_scores'] != stats['none']


def test_gsnet_scores_without_positives_follow_reference(synthetic_root):
    """No matched seed has a positive μ at its chosen view: graspness_implementation skips the
    normalisation (targets stay 0); mmgrasp once divided 0 by log(0/0) here."""
    dataset = checks.recipe_dataset(synthetic_root, 'gsnet', 'deferred')
    batch = checks.load_batch(dataset)
    ref = checks.run_reference('gsnet', synthetic_root, batch)
    # per frame, one seed and a slot whose cells hold no positive μ (collided or infeasible)
    seeds, views = [], []
    for b in range(len(batch['frames'])):
        empty = np.argwhere(~(ref['scores'][b] > 0).any((-2, -1)))  # (seed, slot) pairs
        assert len(empty), f'frame {b}: no seed has a slot without a valid grasp'
        s, v = empty[0]
        seeds.append(batch['seeds'][b, s])
        views.append(v)
    degenerate = dict(batch, seeds=torch.stack(seeds)[:, None],
                      top_view=torch.tensor(views)[:, None])
    matched = checks.run_assigner('gsnet', degenerate)
    ref = checks.run_reference('gsnet', synthetic_root, degenerate, matched)
    assert not (ref['top_scores'] > 0).any()
    checks.compare_fields(matched, ref, 'gsnet without positives')


# ------------------------------------------------------------------------------ mutation check
def source_mutant(target: str, old: str, new: str):
    """Recompile ``module:qualname`` with ``old`` replaced by ``new`` (in-process, patched with
    monkeypatch for the test)."""
    module_name, qualname = target.split(':')

    def apply(monkeypatch):
        module = importlib.import_module(module_name)
        *path, name = qualname.split('.')
        owner = module
        for part in path:
            owner = getattr(owner, part)
        source = textwrap.dedent(inspect.getsource(getattr(owner, name)))
        assert source.count(old) == 1, f'mutant of {target}: {old!r} is not in the source ' \
                                       f'once; update the mutant'
        source = source.replace(old, new)
        if path:  # zero-argument super() needs the class cell the recompiled function lacks
            source = source.replace('super()', f'super({owner.__name__}, self)')
        namespace = dict(vars(module))
        exec(compile(source, f'<mutant of {target}>', 'exec'), namespace)
        monkeypatch.setattr(owner, name, namespace[name])
    return apply


def _first_instance_offset(self, scene, instance):
    """The row offset of the first instance of the same model: a duplicated model's second
    instance reads the first one's collision rows."""
    entry = self.scenes[scene]
    return entry.row_offsets[entry.object_ids.index(entry.object_ids[instance])]


ASSIGNER = 'mmgrasp.models.assigners.nearest_label_assigner:NearestLabelAssigner'
SBG = 'mmgrasp.models.assigners.scale_balanced_assigner:ScaleBalancedAssigner'
BL_LOSS = 'mmgrasp.models.losses.graspnet_loss'
SUMMARIES = 'mmgrasp.storage.labels.summaries'
MATCHED_READER = 'mmgrasp.storage.readers.cells'
MUTANTS = {
    'width <= 0.1 mask dropped in match_view': source_mutant(
        f'{ASSIGNER}.match_view', '(mu > 0) & (widths <= self.max_width)', '(mu > 0)'),
    'GSNet score not divided by log(u_max / u_min)': source_mutant(
        f'{ASSIGNER}.match_view', 'torch.log(u_max / u_min)', '(1 - 1e-6)'),
    'SBG best grasp by argmin': source_mutant(
        f'{SBG}.assign', '.argmax(dim=2, keepdim=True)', '.argmin(dim=2, keepdim=True)'),
    'SBG best view from the summaries by argmin': source_mutant(
        f'{ASSIGNER}._summary_targets', 'view_labels.argmax(dim=2, keepdim=True)',
        'view_labels.argmin(dim=2, keepdim=True)'),
    'SBG robust graspable by >=': source_mutant(
        f'{SBG}.assign', 'graspable_views > self.min_views', 'graspable_views >= self.min_views'),
    "duplicated model's second instance reads the first instance's collision rows":
        lambda monkeypatch: monkeypatch.setattr(LabelStore, 'collision_row_offset',
                                                _first_instance_offset),
    'widths read from offsets[..., 1]': source_mutant(
        'mmgrasp.datasets.graspnet_reader:grasp_label_arrays',
        'offsets[..., 2]', 'offsets[..., 1]'),
    'view re-indexing inverted (argmin over slots)': source_mutant(
        f'{ASSIGNER}.view_reindex', 'd.argmin(dim=2)', 'd.argmin(dim=1)'),
    'view rotation approaches along +view': source_mutant(
        f'{ASSIGNER}.view_rotations', 'approach_to_matrix(-views', 'approach_to_matrix(views'),
    'BL u_max per seed instead of per batch': source_mutant(
        f'{ASSIGNER}._grid_targets', 'scores.max()', 'scores.amax(dim=(2, 3, 4), keepdim=True)'),
    'BL u_max from the min-μ summary': source_mutant(
        f'{ASSIGNER}._summary_targets', "summary['view_max_mu'], zero).max()",
        "summary[min_mu], zero).max()"),
    'min μ summary without the width mask': source_mutant(
        f'{SUMMARIES}:view_summaries', 'masked = positive & (w <= max_width)', 'masked = positive'),
    'chosen-view collision bits one cell off': source_mutant(
        f'{MATCHED_READER}:_collision_windows', 'first_bit = (pair_key % V) * cells',
        'first_bit = (pair_key % V) * cells + 1'),
    "chosen-view cells: collision='mask' not applied to μ": source_mutant(
        f'{ASSIGNER}._view_cells', 'mu = mu.masked_fill(collided, 0)', 'pass'),
    'GSNet view graspness not min-max normalised': source_mutant(
        f'{ASSIGNER}._normalised_view_graspness', 'return (count - low) / (high - low + 1e-5)',
        'return count'),
    "collision='mask' not applied to μ": source_mutant(
        f'{ASSIGNER}._grid_targets', 'scores = scores.masked_fill(collision, 0)', 'pass'),
    'GSNet width target not x10': source_mutant(
        'mmgrasp.models.losses.gsnet_loss:GSNetLoss.__call__', 'matched.top_widths * 10',
        'matched.top_widths'),
    'GSNet graspness loss over every point': source_mutant(
        'mmgrasp.models.losses.gsnet_loss:GSNetLoss.__call__',
        'graspness = mean_where(graspness, on_object)', 'graspness = graspness.mean()'),
    'BL width error not divided by 0.1': source_mutant(
        f'{BL_LOSS}:_stage2_terms', '(width_at - target_width) / GRASP_MAX_WIDTH',
        '(width_at - target_width)'),
    'BL view loss over every seed': source_mutant(
        f'{BL_LOSS}:GraspNetBaselineLoss.__call__',
        'view = mean_where(view, on_object[..., None].expand_as(view))',
        'view = view.mean()'),
    'SBG score mask not widened to every depth': source_mutant(
        f'{BL_LOSS}:ScaleBalancedGraspLoss.__call__',
        'loss_mask.amax(dim=2, keepdim=True).expand_as(loss_mask)', 'loss_mask'),
}


def run_reference_checks(root: str, cache_dir: str) -> None:
    """Assigner fields and loss terms of every recipe, both storages, against the reference;
    and the collision-mask targets. Stops at the first difference."""
    for grids in ('deferred', 'dense'):
        for method in ('gsnet', 'bl', 'sbg'):
            checks.check_losses(root, method, grids, cache_dir)
    for grids in ('deferred', 'dense'):
        checks.check_assigner(root, 'bl', grids, cache_dir, collision='mask')


def test_distinct_instances_copy_tells_them_apart(distinct_instances_root, tmp_path):
    """The premise of the copy the mutants run on (tests/conftest.py): seeds of the checked
    batch match the duplicated model's second instance at cells whose collision flags differ
    from the first instance's."""
    root = distinct_instances_root
    _, ref, batch = checks.check_assigner(root, 'bl', 'deferred', str(tmp_path))
    frames = checks.raw_frames(root, batch)
    objects = [(scene, o) for (scene, _), f in zip(batch['frames'], frames) for o in f]
    first, second = checks.duplicated_instances(root)
    first_masks = checks.RawDataset(root).collision(0)[first]
    differ = []
    for b in range(len(frames)):
        for s, k in enumerate(ref['object_index'][b].tolist()):
            scene, o = objects[k]
            if scene == 0 and o.instance == second:
                r, views = ref['row'][b, s], ref['view_index'][b, s]
                differ.append((first_masks[o.rows[r]][views] != o.collision[r][views]).any())
    assert any(differ), f'{len(differ)} seeds matched the second instance, none where the ' \
                        f'instances differ'


@pytest.mark.slow
def test_reference_checks_pass_unmutated(distinct_instances_root, tmp_path):
    run_reference_checks(distinct_instances_root, str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize('mutant', list(MUTANTS))
def test_mutations_are_caught(distinct_instances_root, tmp_path, monkeypatch, mutant):
    MUTANTS[mutant](monkeypatch)
    # a private label store: mutants of the store's build (widths) must not reach other tests
    with pytest.raises(AssertionError):
        run_reference_checks(distinct_instances_root, str(tmp_path))
