"""Run mmgrasp's assigners and losses of the shipped recipes on batches of the synthetic dataset
and compare them with :mod:`_reference_labels` (plain numpy, raw files). Shared by
test_assigners_reference.py and test_losses_reference.py (a plain module, not a test)."""
import copy
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate

from _reference_labels import RawDataset, bl_losses, gsnet_losses, reference_labels
from mmgrasp.datasets import GraspNetDataset
from mmgrasp.models.data_preprocessors import GraspDataPreprocessor
from mmgrasp.registry import MODELS, TASK_UTILS, build_in_scope
from mmgrasp.structures.matched_labels import GRID_FIELDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
RECIPES = {'gsnet': 'gsnet_deferred.py', 'bl': 'graspnet_baseline_deferred.py',
           'sbg': 'scale_balanced_deferred.py'}
FRAMES = [(0, 0), (1, 2), (1, 4)]  # (epoch, index); scene 0 frames hold one model twice
NUM_SEEDS = 64
V, A, D = 5, 3, 3  # tests/conftest.py SMALL_GRID
# an arbitrary positive width histogram (an input of SBG's assigner, not computed by mmgrasp)
SCALE_STATISTIC = dict(interval=[float(e) for e in np.linspace(0.003, 0.1, 33)],
                       num=[1 + (7 * k) % 13 for k in range(32)])
EXACT = ('valid', 'object_index', 'row', 'view_index', 'top_view', 'robust_graspable',
         'scores', 'widths', 'top_widths', 'top_tolerance', 'collision', 'best_width')



def recipe_config(method: str) -> Config:
    return Config.fromfile(os.path.join(REPO, 'configs', RECIPES[method]))


def recipe_dataset(root: str, method: str, grids: str, collision: Optional[str] = None,
                   cache_dir: Optional[str] = None) -> GraspNetDataset:
    """The recipe's training pipeline on the synthetic frames, augmentation drawn in the worker
    and applied on the device (so the packed poses are the meta poses and the reference gets
    the matrix)."""
    cfg = recipe_config(method)
    pipeline = copy.deepcopy(cfg.train_dataloader.dataset.pipeline)
    for t in pipeline:
        if t['type'] == 'LoadGraspScene':
            t['num_points'] = 1500  # the synthetic test frames are 320x180
        if t['type'] == 'SampleGraspLabels':
            t.update(grids=grids, min_object_points=20, point_fraction=0.5, min_points=10,
                     tolerance=method != 'gsnet')
            if collision is not None:
                t['collision'] = collision
            if cache_dir is not None:
                t['cache_dir'] = cache_dir
        if t['type'] == 'RandomFlipRotateScene':
            t['apply'] = 'device'
    return GraspNetDataset(root, pipeline=pipeline, seed=cfg.train_dataloader.dataset.seed)


def load_batch(dataset: GraspNetDataset, frames=FRAMES, seed: int = 0,
               num_seeds: int = NUM_SEEDS) -> dict:
    """Inputs, seeds (points of the clouds), seed indices, random top views, and what the
    reference needs to find each labelled object in the raw files."""
    data = pseudo_collate([dataset[f] for f in frames])
    aug = [m.numpy() for m in data['inputs'].get('aug_matrix', [None] * len(frames))]
    samples = data['data_samples']
    preprocessor = GraspDataPreprocessor()
    # the label points the model gets: after the visible-label test where the data
    # preprocessor runs it (visible_test='device'), as the samples carry them otherwise
    labelled = [[(o.points.numpy(), o.pose.numpy(), o.object_id) for o in objects]
                for objects in preprocessor.resolve_visibility(samples)]
    inputs = preprocessor(data, training=True)['inputs']
    g = torch.Generator().manual_seed(seed)
    points = inputs['points']
    index = torch.stack([torch.randperm(points.shape[1], generator=g)[:num_seeds]
                         for _ in range(len(points))])
    seeds = torch.gather(points, 1, index[..., None].expand(-1, -1, 3))
    top_view = torch.randint(0, V, (len(points), num_seeds), generator=g)
    return dict(inputs=inputs, seeds=seeds, seed_index=index, top_view=top_view,
                frames=[(s.metainfo['scene'], s.metainfo['frame']) for s in samples],
                labelled=labelled, aug=aug)


def raw_frames(root: str, batch: dict, collision: str = 'zero_scores') -> List[list]:
    raw = RawDataset(root)
    return [raw.frame_objects(scene, frame, labelled, collision, aug)
            for (scene, frame), labelled, aug in zip(batch['frames'], batch['labelled'],
                                                     batch['aug'])]


def duplicated_instances(root: str, scene: int = 0) -> List[int]:
    """Meta positions of the model present twice in ``scene`` (cls_indexes of frame 0)."""
    _, ids = RawDataset(root).meta(scene, 0)
    return [i for i in range(len(ids)) if (ids == ids[i]).sum() > 1]


def build_assigner(method: str, min_views: Optional[int] = None):
    cfg = dict(recipe_config(method).model.assigner, num_views=V)
    if method == 'sbg':
        cfg.update(scale_statistic=SCALE_STATISTIC, min_views=min_views)
    return build_in_scope(TASK_UTILS, cfg)


def robust_min_views(reference_view_labels: np.ndarray) -> int:
    """SBG wants more than 10 of 300 views; on the 5-view test grid, a min_views at which some
    seed has exactly that many views with a label > 0.1 and some have more, so both sides of
    the strict '>' are exercised."""
    counts = (reference_view_labels > 0.1).sum(-1).ravel()
    values, seen = np.unique(counts, return_counts=True)
    usable = [v for v in values if v < counts.max()]
    return int(max(usable, key=lambda v: seen[list(values).index(v)]))


def run_assigner(method: str, batch: dict, min_views: Optional[int] = None):
    assigner = build_assigner(method, min_views)
    labels = batch['inputs']['grasp_labels']
    matched = assigner.assign(batch['seeds'], labels)
    return assigner.match_view(matched, batch['top_view'], labels)


def run_reference(method: str, root: str, batch: dict, matched=None, collision='zero_scores',
                  min_views: Optional[int] = None) -> dict:
    """The reference's fields; seeds whose nearest label point is a true tie (float32 may order
    it either way) take mmgrasp's pick when it is one of the tied points."""
    frames = raw_frames(root, batch, collision)
    args = dict(scale_statistic=SCALE_STATISTIC, min_views=min_views or 0)
    ref = reference_labels(method, batch['seeds'].double().numpy(), frames,
                           batch['top_view'].numpy(), **args)
    if ref['ties'] and matched is not None:
        choice = {}
        for (b, s), tied in ref['ties'].items():
            pick = (int(matched.object_index[b, s]), int(matched.row[b, s]))
            assert pick in tied, f'seed {(b, s)}: mmgrasp matched {pick}, not one of {tied}'
            choice[(b, s)] = pick
        ref = reference_labels(method, batch['seeds'].double().numpy(), frames,
                               batch['top_view'].numpy(), choice=choice, **args)
    if collision == 'mask':
        ref['collision'] = gather_reference_collision(frames, ref)
    return ref


def gather_reference_collision(frames: List[list], ref: dict) -> np.ndarray:
    objects = [o for frame in frames for o in frame]
    B, Ns = ref['row'].shape
    return np.stack([objects[ref['object_index'][b, s]].collision[ref['row'][b, s]][
        ref['view_index'][b, s]] for b in range(B) for s in range(Ns)]).reshape(
        B, Ns, *ref['view_index'].shape[2:], *objects[0].collision.shape[2:])


def compare_fields(matched, ref: dict, where: str = '') -> None:
    """Every MatchedLabels field against the reference: the same presence, shape and values
    (bit-exact for indices, masks and copied grid values; to float32 precision otherwise).
    Labels matched through summaries (``matched.scores`` None) carry no grid-sized field."""
    summaries = matched.scores is None
    for name, got in matched.items():
        assert name in ref, f'{where}: the reference has no field {name!r}; extend it'
        want = ref[name]
        if summaries and name in GRID_FIELDS:
            assert got is None, f'{where} {name}: a grid-sized field read through summaries'
            continue
        assert (got is None) == (want is None), f'{where} {name}: mmgrasp ' \
            f'{"None" if got is None else "a tensor"}, reference {"None" if want is None else "an array"}'
        if got is None:
            continue
        got = got.detach().numpy()
        assert got.shape == np.shape(want), f'{where} {name}: shape {got.shape} != {np.shape(want)}'
        assert np.isfinite(got).all() if got.dtype.kind == 'f' else True, \
            f'{where} {name}: not finite'
        if name in EXACT:
            np.testing.assert_array_equal(got, np.asarray(want, dtype=got.dtype),
                                          err_msg=f'{where} {name}')
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6,
                                       err_msg=f'{where} {name}')


def check_assigner(root: str, method: str, grids: str, cache_dir: Optional[str] = None,
                   collision: Optional[str] = None) -> Tuple[object, dict, dict]:
    """Load the recipe's batch, run its assigner and compare with the reference."""
    dataset = recipe_dataset(root, method, grids, collision, cache_dir)
    batch = load_batch(dataset)
    mode = collision or recipe_config(method).train_dataloader.dataset.pipeline[1]['collision']
    min_views = None
    if method == 'sbg':
        min_views = robust_min_views(run_reference('bl', root, batch, None, mode)['view_labels'])
    matched = run_assigner(method, batch, min_views)
    ref = run_reference(method, root, batch, matched, mode, min_views)
    compare_fields(matched, ref, f'{method} {grids}')
    return matched, ref, batch


# ------------------------------------------------------------------------------------ losses
def random_predictions(method: str, batch: dict, seed: int = 1) -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    B, Ns = batch['seeds'].shape[:2]
    N = batch['inputs']['points'].shape[1]
    if method == 'gsnet':
        return dict(objectness=torch.randn(B, 2, N, generator=g),
                    graspness=torch.rand(B, N, generator=g),
                    view=torch.rand(B, Ns, V, generator=g),
                    score=torch.rand(B, Ns, A, D, generator=g),
                    width=torch.rand(B, Ns, A, D, generator=g))
    return dict(objectness=torch.randn(B, 2, Ns, generator=g),
                view=torch.rand(B, Ns, V, generator=g) * 2,
                score=torch.rand(B, A, Ns, D, generator=g) * 2,
                angle=torch.randn(B, A, Ns, D, generator=g),
                width=torch.rand(B, A, Ns, D, generator=g) * 0.1,
                tolerance=torch.rand(B, A, Ns, D, generator=g) * 0.05)


def check_losses(root: str, method: str, grids: str, cache_dir: Optional[str] = None) -> dict:
    """The recipe's loss (weights from its config) on mmgrasp's matched labels against the
    reference loss on the reference labels, term by term, for the same predictions."""
    matched, ref, batch = check_assigner(root, method, grids, cache_dir)
    loss_cfg = recipe_config(method).model.loss
    loss_fn = build_in_scope(MODELS, loss_cfg)
    weights = {k: v for k, v in loss_cfg.items() if k != 'type'}
    if method != 'gsnet':
        weights = dict(objectness=weights['objectness'], view=weights['view'],
                       **{k: weights['grasp'] for k in ('score', 'angle', 'width',
                                                         'tolerance')})
    pred = random_predictions(method, batch)
    inputs = batch['inputs']
    np_pred = {k: v.double().numpy() for k, v in pred.items()}
    ref_labels = {k: v for k, v in ref.items() if k != 'ties'}
    if method == 'gsnet':
        got = loss_fn(pred['objectness'], pred['graspness'], inputs['objectness'],
                      inputs['graspness'], pred['view'], pred['score'], pred['width'], matched)
        want = gsnet_losses(np_pred, ref_labels, inputs['objectness'].numpy(),
                            inputs['graspness'].double().numpy(), weights)
    else:
        seed_objectness = torch.gather(inputs['objectness'], 1, batch['seed_index'])
        got = loss_fn(pred['objectness'], seed_objectness, pred['view'], pred['score'],
                      pred['angle'], pred['width'], pred['tolerance'], matched)
        want = bl_losses(np_pred, ref_labels, seed_objectness.numpy(), weights,
                         sbg=method == 'sbg')
    assert set(got) == {f'loss_{k}' for k in want}, (sorted(got), sorted(want))
    for key, value in want.items():
        value_got = got[f'loss_{key}']
        assert torch.isfinite(value_got), f'{method} {grids} loss_{key} is not finite'
        np.testing.assert_allclose(value_got.item(), value, rtol=2e-5, atol=1e-7,
                                   err_msg=f'{method} {grids} loss_{key}')
    return got
