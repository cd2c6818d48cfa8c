"""SampleGraspLabels: choose each object's label points and ship its grids, dense or deferred."""
from typing import Dict, Optional, Sequence

import numpy as np
import torch
from mmcv.transforms import BaseTransform
from scipy.spatial import cKDTree

from mmgrasp.geometry.gripper import build_gripper
from mmgrasp.registry import TRANSFORMS
from mmgrasp.storage.readers import StoreGrids
from mmgrasp.storage.labels.maps import open_maps
from mmgrasp.storage.labels.store import (LabelStore, open_label_store, open_remote_label_store,
                                         unpack_rows, zero_where)
from mmgrasp.structures.grasp_labels import COLLISION_MODES, ObjectGraspLabels
from mmgrasp.structures.label_visibility import PendingVisibility, draw_rows
from ..graspnet_reader import DatasetFileError
from ..layouts import open_reader

GRID_STORAGES = ('dense', 'deferred')
VISIBLE_TESTS = ('device', 'worker')
_stores: Dict[tuple, LabelStore] = {}


def label_store_for(data_root: str, cache_dir: Optional[str] = None,
                    tolerance_dir: Optional[str] = None, store_url: Optional[str] = None,
                    remote: Optional[dict] = None) -> LabelStore:
    """The label store of a dataset root, opened (built when missing or stale) once a process;
    with ``store_url`` the store published there."""
    key = (data_root, cache_dir, tolerance_dir, store_url, repr(sorted((remote or {}).items())))
    if key not in _stores:
        if store_url:
            _stores[key] = open_remote_label_store(store_url, cache_dir, remote)
        else:
            reader = open_reader(data_root, tolerance_dir=tolerance_dir)
            _stores[key] = open_label_store(reader, cache_dir)
    return _stores[key]


@TRANSFORMS.register_module()
class SampleGraspLabels(BaseTransform):
    """Keep max(⌊Np·point_fraction⌋, min_points) label points per visible object (all when
    fewer) and attach its grids: read now (``grids='dense'``, the reference path) or described
    by a :class:`StoreGrids` record that the model reads after choosing its seeds
    (``grids='deferred'``). Label points, poses and random draws do not depend on ``grids``.

    Args:
        point_fraction: share of an object's label points kept.
        min_points: keep at least this many (or all, when the object has fewer).
        min_object_points: skip objects with fewer sampled scene points.
        visible_only: keep only label points within ``visible_distance`` of the object's
            sampled scene points (GraspNet-baseline, Scale-Balanced-Grasp).
        visible_distance: metres.
        visible_test: where the visible test runs: ``'device'`` (the data preprocessor tests
            the batch on its device; the worker ships every label point of the object and its
            sampled points, :class:`~mmgrasp.structures.label_visibility.PendingVisibility`)
            or ``'worker'`` (a cKDTree per object here, the reference path; the only one with
            ``grids='dense'``, whose rows are read here). None: ``'device'`` with deferred
            grids, else ``'worker'``. The same rows either way: the draw among the visible
            points takes a generator seeded from the sample's stream.
        collision: ``'zero_scores'`` (μ and tolerance 0 where the grasp collides with the
            scene), ``'mask'`` (carry the mask; the assigner applies it where it matches the
            labels, so the targets equal ``'zero_scores'``, and keeps it in
            ``MatchedLabels.collision``) or ``'none'``.
        tolerance: carry tolerance radii.
        skip_objects: object ids never labelled (GraspNet-baseline skips 18).
        grids: ``'dense'`` or ``'deferred'``.
        cache_dir: label store cache (default ``$MMGRASP_CACHE``); with ``store_url`` the
            remote store's block cache and local mirror.
        tolerance_dir: where ``%03d_tolerance.npy`` live (default ``<root>/tolerance``).
        store_url: read the label store published at this URL (``s3://``, ``gs://``,
            ``az://``, ``http(s)://``, ``file://``; read through obstore) instead of building
            one from the dataset root; deferred grids only (loader workers never touch the network).
        remote: how the remote store is read: :class:`mmgrasp.storage.RemoteOptions` fields
            (gap, block_size, cache_bytes, concurrency, read_ahead, timeout, retries, ...) and
            ``storage_options``: the object store's configuration keys (endpoint, region, ...).
        gripper: the gripper of the run (:class:`mmgrasp.geometry.Gripper` or a dict of its
            fields; None: GraspNet's); labels made for another one are refused, naming both.

    Required Keys:
        - seg (N,) int64, 0 background, k = object id + 1
        - points (N, 3) float32 camera frame (with ``visible_only``)
        - object_ids (M,) int64, poses (M, 3, 4) float32, instance_index (M,) int64
        - scene, data_root, rng

    Added Keys:
        - grasp_labels (list[ObjectGraspLabels]): one per kept object
        - grasp_label_instances (K,) int64: index of each kept object in ``poses``; the pose of
          a label is taken from ``poses`` when the sample is packed, after augmentation
        - grasp_label_visibility (PendingVisibility): with ``visible_test='device'``; the
          labels then carry all their label points until the data preprocessor keeps some
    """

    def __init__(self, point_fraction: float = 0.25, min_points: int = 300,
                 min_object_points: int = 50, visible_only: bool = False,
                 visible_distance: float = 0.01, visible_test: Optional[str] = None,
                 collision: str = 'zero_scores',
                 tolerance: bool = False, skip_objects: Sequence[int] = (),
                 grids: str = 'deferred', cache_dir: Optional[str] = None,
                 tolerance_dir: Optional[str] = None, store_url: Optional[str] = None,
                 remote: Optional[dict] = None, gripper: Optional[dict] = None):
        if grids not in GRID_STORAGES:
            raise ValueError(f'SampleGraspLabels: grids={grids!r} is not a storage; expected one '
                             f'of {GRID_STORAGES}')
        if store_url and grids == 'dense':
            raise ValueError(f'SampleGraspLabels: store_url={store_url!r} serves deferred grids '
                             f'only: grids=\'dense\' would read whole grids in loader workers, '
                             f'which never touch the network')
        visible_test = visible_test or ('device' if grids == 'deferred' else 'worker')
        if visible_test not in VISIBLE_TESTS:
            raise ValueError(f'SampleGraspLabels: visible_test={visible_test!r}: expected one '
                             f'of {VISIBLE_TESTS}')
        if visible_test == 'device' and grids == 'dense':
            raise ValueError("SampleGraspLabels: visible_test='device' needs grids='deferred' "
                             "(dense grids are read in the worker, after the test)")
        if collision not in COLLISION_MODES:
            raise ValueError(f'SampleGraspLabels: collision={collision!r}: expected one of '
                             f'{COLLISION_MODES}')
        self.point_fraction = point_fraction
        self.min_points = min_points
        self.min_object_points = min_object_points
        self.visible_only = visible_only
        self.visible_distance = visible_distance
        self.visible_test = visible_test
        self.collision = collision
        self.tolerance = tolerance
        self.skip_objects = tuple(int(o) for o in skip_objects)
        self.grids = grids
        self.cache_dir = cache_dir
        self.tolerance_dir = tolerance_dir
        self.store_url = store_url
        self.remote = dict(remote or {})
        self.gripper = build_gripper(gripper)
        self._checked_stores = set()

    def config(self) -> dict:
        """The label recipe, without ``grids``: derived assets are shared by both storages."""
        return dict(type=type(self).__name__, point_fraction=self.point_fraction,
                    min_points=self.min_points, min_object_points=self.min_object_points,
                    visible_only=self.visible_only, visible_distance=self.visible_distance,
                    collision=self.collision, tolerance=self.tolerance,
                    skip_objects=list(self.skip_objects))

    def prepare(self, data_root: str, camera: Optional[str] = None) -> LabelStore:
        """Open (and build when needed) the store in the main process, before workers fork.
        Labels are the same for every camera: ``camera`` is accepted and not needed."""
        store = label_store_for(data_root, self.cache_dir, self.tolerance_dir, self.store_url,
                                self.remote)
        if id(store) not in self._checked_stores:
            store.check_gripper(self.gripper, 'SampleGraspLabels.gripper')
            self._checked_stores.add(id(store))
        return store

    def _choose_rows(self, points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Without the visible test: a share of all the object's label points."""
        keep = min(max(int(len(points) * self.point_fraction), self.min_points), len(points))
        return np.sort(rng.choice(len(points), keep, replace=False))

    def _visible(self, camera_points: np.ndarray, object_points: np.ndarray) -> np.ndarray:
        """The worker's visible test: label points within ``visible_distance`` of the
        object's sampled points (cKDTree, float64)."""
        distance, _ = cKDTree(object_points).query(camera_points, k=1)
        return distance < self.visible_distance

    def _dense(self, store: LabelStore, record: StoreGrids) -> dict:
        rows, maps = record.rows, open_maps()
        grids = {name: np.take(maps.get(record.object_file(name)), rows, axis=0)
                 for name in ('scores', 'widths')}
        if self.tolerance:
            levels = np.take(maps.get(record.object_file('tolerance')), rows, axis=0)
            grids['tolerance'] = store.tolerance_radii(record.object_id)[levels]
        if self.collision != 'none':
            packed = np.take(maps.get(record.collision_file()), rows + record.collision_offset,
                             axis=0)
            collided = unpack_rows(packed, store.grid)
            if self.collision == 'mask':
                grids['collision'] = collided
            else:
                zero_where(grids['scores'], collided)
                if self.tolerance:
                    zero_where(grids['tolerance'], collided)
        return {name: torch.from_numpy(np.ascontiguousarray(g)) for name, g in grids.items()}

    @staticmethod
    def _check_objects(store: LabelStore, scene: int, results: dict) -> None:
        """The store's collision rows of a scene follow its object list (checked against the
        collision file when the store was built): a frame listing other objects would read
        another instance's rows."""
        ids = tuple(int(o) for o in results['object_ids'])
        reader = results.get('reader')
        where = (reader.frame_path(scene, 'meta', int(results['frame'])) if reader is not None
                 else f'scene {scene} frame {results.get("frame")}')
        if scene not in store.scenes:
            raise DatasetFileError(where, store.missing_scene_reason(scene))
        listed = store.scenes[scene].object_ids
        if ids != listed:
            raise DatasetFileError(where, f'cls_indexes list objects {list(ids)} (0-based) but '
                                          f'the label store {store.path} holds collision rows '
                                          f'of scene {scene} for {listed} (its object_id_list.txt'
                                          f' order)')

    def transform(self, results: dict) -> dict:
        store = self.prepare(results['data_root'])
        seg, rng, scene = results['seg'], results['rng'], int(results['scene'])
        self._check_objects(store, scene, results)
        # the draw among visible points: its own generator, so that the device path, which
        # draws after the test, consumes the sample's stream as the worker path does
        seed = int(rng.integers(2 ** 63)) if self.visible_only else None
        labels, instances, visible, pending = [], [], [], ([], [])
        on_objects = np.bincount(seg)  # sampled points per segmentation label
        for i, (obj, pose) in enumerate(zip(results['object_ids'], results['poses'])):
            obj = int(obj)
            sampled = on_objects[obj + 1] if obj + 1 < len(on_objects) else 0
            if obj in self.skip_objects or sampled < self.min_object_points:
                continue
            points = store.points(obj)
            if self.visible_only:
                camera_points = points @ pose[:, :3].T + pose[:, 3]
                object_points = results['points'][seg == obj + 1]
                if self.visible_test == 'device':
                    pending[0].append(camera_points)
                    pending[1].append(object_points)
                    rows = np.arange(len(points))
                else:
                    visible.append(self._visible(camera_points, object_points))
                    rows = None  # drawn below, object after object
            else:
                rows = self._choose_rows(points, rng)
            labels.append((obj, pose, rows, int(results['instance_index'][i])))
            instances.append(i)
        if self.visible_only and self.visible_test == 'worker':
            drawn = iter(draw_rows(visible, seed, self.point_fraction, self.min_points))
            labels = [(obj, pose, next(drawn), k) for obj, pose, _, k in labels]
        results['grasp_labels'] = [self._labels(store, scene, *label) for label in labels]
        results['grasp_label_instances'] = np.asarray(instances, dtype=np.int64)
        if self.visible_only and self.visible_test == 'device':
            results['grasp_label_visibility'] = self._pending(*pending, seed)
        return results

    def _labels(self, store: LabelStore, scene: int, obj: int, pose: np.ndarray,
                rows: np.ndarray, instance: int) -> ObjectGraspLabels:
        record = StoreGrids(store=store.path, object_id=obj, rows=rows.astype(np.int32),
                            grid=store.grid, collision_mode=self.collision,
                            has_tolerance=self.tolerance, scene=scene,
                            collision_offset=store.collision_row_offset(scene, instance),
                            matched_cells=store.objects[obj].score_codes)
        grids = self._dense(store, record) if self.grids == 'dense' else dict(deferred=record)
        return ObjectGraspLabels(
            points=torch.from_numpy(store.points(obj)[rows]),
            pose=torch.from_numpy(np.ascontiguousarray(pose, dtype=np.float32)),
            object_id=obj, collision_mode=self.collision, **grids)

    def _pending(self, camera_points: list, object_points: list,
                 seed: int) -> PendingVisibility:
        """One flat buffer of label points and one of scene points for the whole sample."""
        def flat(parts):
            if not parts:
                return torch.zeros((0, 3), dtype=torch.float32), np.zeros(0, dtype=np.int64)
            return (torch.from_numpy(np.concatenate(parts).astype(np.float32, copy=False)),
                    np.array([len(p) for p in parts], dtype=np.int64))
        label_points, label_counts = flat(camera_points)
        scene_points, scene_counts = flat(object_points)
        return PendingVisibility(label_points, label_counts, scene_points, scene_counts, seed,
                                 self.visible_distance, self.point_fraction, self.min_points)

    def __repr__(self) -> str:
        args = ', '.join(f'{k}={v!r}' for k, v in self.config().items() if k != 'type')
        where = f', store_url={self.store_url!r}' if self.store_url else ''
        return (f'{type(self).__name__}({args}, grids={self.grids!r}, '
                f'visible_test={self.visible_test!r}{where})')
