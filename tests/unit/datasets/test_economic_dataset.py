"""EconomicGrasp's sample (configs/_base_/datasets/graspnet_economic.py) on both layouts: the
dense and deferred labels carry the same rows, the augmentation is the flip only, the labels
follow the augmented poses."""
import os

import numpy as np
import pytest
import torch
from mmengine.config import Config

from mmgrasp.datasets import GraspNetDataset
from mmgrasp.structures.economic_labels import ROW_NAMES, gather_economic_rows
from mmgrasp.apis import register_all_modules

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
register_all_modules()


def dataset(root, grids, layout=None, camera='realsense'):
    cfg = Config.fromfile(os.path.join(REPO, 'configs/_base_/datasets/graspnet_economic.py'))
    pipeline = cfg.train_pipeline
    pipeline[0]['num_points'] = 1500
    pipeline[1]['grids'] = grids
    kwargs = dict(layout=layout, camera=camera) if layout else {}
    return GraspNetDataset(root, pipeline=pipeline, seed=5, **kwargs)


@pytest.mark.parametrize('layout', ['graspnet', 'graspclutter6d'])
def test_dense_and_deferred_samples_agree(request, layout):
    root = request.getfixturevalue('synthetic_root' if layout == 'graspnet' else 'gc6d_root')
    kwargs = dict(layout='graspclutter6d', camera='realsense-d435') \
        if layout == 'graspclutter6d' else {}
    dense, deferred = dataset(root, 'dense', **kwargs), dataset(root, 'deferred', **kwargs)
    flips = set()
    for i in range(min(4, len(dense))):
        a, b = dense[i], deferred[i]
        for key in a['inputs']:
            assert torch.equal(a['inputs'][key], b['inputs'][key]), key
        la, lb = a['data_samples'].economic_labels, b['data_samples'].economic_labels
        assert la.deferred is None and lb.dense is None
        assert torch.equal(la.points, lb.points) and torch.equal(la.poses, lb.poses)
        assert torch.equal(la.point_instance, lb.point_instance)
        assert la.poses.shape[0] == int(la.point_instance.max()) + 1 or len(la.points) == 0
        every = torch.arange(len(la.points))
        ra = gather_economic_rows([la], torch.zeros_like(every), every)
        rb = gather_economic_rows([lb], torch.zeros_like(every), every)
        for name in ROW_NAMES:
            assert ra[name].dtype == rb[name].dtype and torch.equal(ra[name], rb[name]), name
        assert torch.equal(ra['vgraspness'], la.dense['vgraspness'])
        assert a['inputs']['coors'].shape == a['inputs']['points'].shape
    # the flip only: the points are the unaugmented sample's, x negated or not
    plain = GraspNetDataset(root, seed=5, pipeline=[dict(
        type='LoadGraspScene', num_points=1500, outlier=0.02, voxel_size=0.005,
        with_graspness=True)], **kwargs)
    for i in range(min(4, len(dense))):
        points = dense[i]['inputs']['points'].numpy()
        raw = plain[i]['points']
        same = np.array_equal(points, raw)
        flipped = np.array_equal(points, raw * np.float32([-1, 1, 1]))
        assert same or flipped
        flips.add(flipped)
    assert flips == {True, False} or len(dense) < 4


def test_load_economic_labels_checks_its_arguments_and_the_scene(synthetic_root):
    from mmgrasp.datasets.layouts import open_reader
    from mmgrasp.datasets.transforms import LoadEconomicLabels
    with pytest.raises(ValueError, match='grids'):
        LoadEconomicLabels(grids='lazy')
    with pytest.raises(ValueError, match='view_dtype'):
        LoadEconomicLabels(view_dtype='uint8')
    t = LoadEconomicLabels(top_k=2, quantize=False)
    assert repr(t) == ("LoadEconomicLabels(grids='deferred', top_k=2, quantize=False, "
                       "view_dtype='uint16')")
    prepared = t.prepare(synthetic_root)
    assert prepared.top_k == 2 and not prepared.quantize and prepared.scenes
    reader = open_reader(synthetic_root)
    results = dict(reader=reader, scene=0, object_ids=np.array([87]),
                   poses=np.zeros((1, 3, 4), np.float32))
    with pytest.raises(ValueError, match='scene 0 lists objects'):
        t.transform(results)
    ids = np.array(reader.load_meta(0, 0).object_ids)
    results.update(object_ids=ids, poses=np.zeros((len(ids), 3, 4), np.float32))
    labels = t.transform(results)['economic_labels']
    assert np.load(labels.deferred.file('topview'), mmap_mode='r').shape[1] == 2
    assert labels.deferred.path == prepared.path  # the prepared asset, not a second build


def test_gc6d_config_and_device_augmentation(synthetic_root):
    cfg = Config.fromfile(os.path.join(REPO, 'configs/_base_/datasets/graspclutter6d_economic.py'))
    assert cfg.train_dataloader.dataset.layout == 'graspclutter6d'
    assert cfg.train_dataloader.dataset.camera == 'realsense-d435'
    assert [t['type'] for t in cfg.train_pipeline][1] == 'LoadEconomicLabels'
    # with the augmentation on the device the label poses are turned when packed, in the worker
    # (they stay on the host): the worker path's poses, bit for bit
    poses = {}
    for apply in ('worker', 'device'):
        pipeline = [dict(type='LoadGraspScene', num_points=500, with_graspness=True),
                    dict(type='LoadEconomicLabels'),
                    dict(type='RandomFlipRotateScene', apply=apply),
                    dict(type='PackGraspInputs')]
        sample = GraspNetDataset(synthetic_root, pipeline=pipeline, seed=0)[0]
        poses[apply] = sample['data_samples'].economic_labels.poses
    assert poses['worker'].numpy().tobytes() == poses['device'].numpy().tobytes()
