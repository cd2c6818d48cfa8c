"""LoadEconomicLabels: EconomicGrasp's per-scene labels of a frame, dense or deferred."""
from typing import Dict, Optional, Tuple

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from mmgrasp.registry import TRANSFORMS
from mmgrasp.storage.labels.economic import VIEW_DTYPES
from mmgrasp.storage.labels.economic_store import EconomicStore, open_economic_labels
from mmgrasp.storage.labels.store import open_label_store
from mmgrasp.structures.economic_labels import (EconomicFrameLabels, EconomicRowsRecord,
                                                ROW_NAMES, decode_rows)

GRIDS = ('deferred', 'dense')
_assets: Dict[tuple, EconomicStore] = {}
_scene_points: Dict[Tuple[str, int], tuple] = {}


@TRANSFORMS.register_module()
class LoadEconomicLabels(BaseTransform):
    """Attach the economic labels of the frame's scene (built from the label store on first
    use, see :mod:`mmgrasp.storage.labels.economic_store`).

    Every instance of the frame's meta is kept, with all its kept label points, as in
    EconomicGrasp's dataset (no point sampling). ``grids='dense'`` puts the decoded arrays of
    the whole scene into the sample (the reference path, what EconomicGrasp loads); the
    default ``'deferred'`` ships a record and the assigner reads the matched rows only.

    Required Keys:

    - reader (GraspNetReader or GraspClutter6DReader)
    - scene (int)
    - object_ids (np.int64, (M,)): meta order

    Added Keys:

    - economic_labels (EconomicFrameLabels): poses are set by PackGraspInputs after
      augmentation (here the un-augmented ones)

    Args:
        grids: ``'deferred'`` or ``'dense'``.
        top_k: views kept per label point (EconomicGrasp: 300).
        quantize: the reference's uint8 scores and widths (else float32).
        view_dtype: stored dtype of the view ids.
        cache_dir: label store cache (default ``$MMGRASP_CACHE``).
    """

    def __init__(self, grids: str = 'deferred', top_k: int = 300, quantize: bool = True,
                 view_dtype: str = 'uint16', cache_dir: Optional[str] = None):
        if grids not in GRIDS:
            raise ValueError(f'LoadEconomicLabels: grids={grids!r}: expected one of {GRIDS}')
        if view_dtype not in VIEW_DTYPES:
            raise ValueError(f'LoadEconomicLabels: view_dtype={view_dtype!r}: expected one of '
                             f'{VIEW_DTYPES}')
        self.grids = grids
        self.top_k = int(top_k)
        self.quantize = bool(quantize)
        self.view_dtype = view_dtype
        self.cache_dir = cache_dir

    def asset(self, reader) -> EconomicStore:
        """The economic labels of the reader's root, opened (built when needed) once a
        process; forked workers inherit them."""
        key = (reader.root, reader.tolerance_dir, self.cache_dir, self.top_k, self.quantize,
               self.view_dtype)
        if key not in _assets:
            store = open_label_store(reader, self.cache_dir)
            _assets[key] = open_economic_labels(store, self.top_k, self.quantize,
                                                self.view_dtype)
        return _assets[key]

    def transform(self, results: dict) -> dict:
        asset, scene = self.asset(results['reader']), int(results['scene'])
        entry = asset.scenes.get(scene)
        ids = tuple(int(o) for o in results['object_ids'])
        if entry is None or entry.object_ids != ids:
            raise ValueError(f'LoadEconomicLabels: scene {scene} lists objects {ids}, the '
                             f'economic labels {asset.path} '
                             f'{"have no such scene" if entry is None else entry.object_ids}')
        key = (asset.path, scene)
        if key not in _scene_points:
            _scene_points[key] = (np.asarray(asset.load(scene, 'points', mmap=False), np.float32),
                                  asset.load(scene, 'pointid', mmap=False).astype(np.int64))
        points, instance = _scene_points[key]
        dense = deferred = None
        if self.grids == 'dense':
            dense = {k: torch.from_numpy(v) for k, v in decode_rows(
                {name: asset.load(scene, name, mmap=False) for name in ROW_NAMES}).items()}
        else:
            deferred = EconomicRowsRecord(asset.path, scene)
        results['economic_labels'] = EconomicFrameLabels(
            torch.from_numpy(points), torch.from_numpy(instance),
            torch.arange(len(points), dtype=torch.int64),
            torch.from_numpy(np.ascontiguousarray(results['poses'], np.float32)),
            dense, deferred)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(grids={self.grids!r}, top_k={self.top_k}, '
                f'quantize={self.quantize}, view_dtype={self.view_dtype!r})')
