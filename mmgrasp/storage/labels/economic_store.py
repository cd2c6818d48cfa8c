"""The economic-label asset: EconomicGrasp's per-scene labels (:mod:`.economic`) as a derived
asset of one label-store version, memory-mappable ``.npy`` so that a batch reads only the rows
it matched.

Layout of a version (see :mod:`..derived_assets` for versions, locking and atomic rebuilds)::

    manifest.json                    label-store version it was derived from, options, scenes
    scenes/%04d/points.npy           (R, 3) float32 kept label points, model frames
                pointid.npy          (R,) uint8 instance index in meta cls_indexes order
                object_row.npy       (R,) int32 row of the point in its object's label file
                rotations.npy        (R, K) uint8 best angle of each top view
                depth.npy            (R, K) uint8 its best depth
                scores.npy           (R, K) uint8 score · 10 (float32 with quantize=False)
                widths.npy           (R, K) uint8 width · 1000 (float32 metres unquantised)
                vgraspness.npy       (R, V) float32 view graspness, view-id order
                topview.npy          (R, K) uint16 (or int32) view id of each kept view

Rows of a scene are its instances' kept points, instance after instance (``instance_offsets``
in the manifest), so the rows of an instance are one slice and the rows of one object model
seen twice in a scene differ where its two instances' collisions differ. The asset folder sits
beside the label store's and is named by the options, so stores of different options coexist.
"""
import os
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
from mmengine.logging import print_log

from . import economic
from ..derived_assets import VersionHold, open_or_build, read_manifest, save_array
from .store import LabelStore, LabelStoreError, unpack_rows

FORMAT_VERSION = 1


def economic_folder(store: LabelStore, top_k: int, quantize: bool, view_dtype: str) -> str:
    """Where the economic asset of ``store`` with these options lives."""
    base = os.path.dirname(os.path.abspath(store.path))
    return f'{base}-economic-k{top_k}-{"u8" if quantize else "f32"}-{view_dtype}'


@dataclass(frozen=True)
class EconomicScene:
    object_ids: Tuple[int, ...]
    instance_offsets: Tuple[int, ...]  # first row of each instance; last entry: the row count

    def rows(self, instance: int) -> Tuple[int, int]:
        return self.instance_offsets[instance], self.instance_offsets[instance + 1]


class EconomicStore:
    """An opened economic asset version: the manifest, and per-scene files on demand."""

    def __init__(self, path: str, manifest: dict, hold: Optional[VersionHold] = None):
        self.path = path
        self.manifest = manifest
        self.hold = hold
        self.top_k = int(manifest['top_k'])
        self.quantize = bool(manifest['quantize'])
        self.scenes: Dict[int, EconomicScene] = {
            int(k): EconomicScene(tuple(v['object_ids']), tuple(v['instance_offsets']))
            for k, v in manifest['scenes'].items()}

    def file(self, scene: int, name: str) -> str:
        if scene not in self.scenes:
            raise KeyError(f'scene {scene} is not in economic labels {self.path} (it has '
                           f'{sorted(self.scenes)})')
        if name not in economic.ROW_ARRAYS:
            raise KeyError(f'{name!r} is not an economic label array {economic.ROW_ARRAYS}')
        return f'{self.path}/scenes/{scene:04d}/{name}.npy'

    def load(self, scene: int, name: str, mmap: bool = True) -> np.ndarray:
        return np.load(self.file(scene, name), mmap_mode='r' if mmap else None)


def _build_into(tmp: str, store: LabelStore, options: dict) -> dict:
    t0, scenes, nbytes = time.time(), {}, 0
    for i, scene in enumerate(sorted(store.scenes)):
        entry = store.scenes[scene]
        collision = np.load(store.collision_file(scene), mmap_mode='r')
        instances = []
        for instance, obj in enumerate(entry.object_ids):
            n = store.objects[obj].num_points
            start = store.collision_row_offset(scene, instance)
            instances.append((
                store.points(obj),
                np.load(store.object_file(obj, 'scores'), mmap_mode='r'),
                np.load(store.object_file(obj, 'widths'), mmap_mode='r'),
                unpack_rows(np.asarray(collision[start:start + n]), store.grid)))
        arrays = economic.economic_scene(instances, **options)
        folder = os.path.join(tmp, 'scenes', f'{scene:04d}')
        os.makedirs(folder)
        for name, array in arrays.items():
            save_array(os.path.join(folder, f'{name}.npy'), array)
            nbytes += array.nbytes
        counts = np.bincount(arrays['pointid'], minlength=len(entry.object_ids))
        scenes[f'{scene:04d}'] = dict(
            object_ids=list(entry.object_ids),
            instance_offsets=[0] + [int(c) for c in np.cumsum(counts)])
        print_log(f'economic labels: scene {scene:04d} ({i + 1}/{len(store.scenes)}, '
                  f'{len(arrays["pointid"])} kept points, {time.time() - t0:.1f}s, '
                  f'{nbytes / 2 ** 20:.1f} MiB)', logger='current')
    return dict(format_version=FORMAT_VERSION, label_store=os.path.basename(store.path),
                grid=list(store.grid), top_k=options['top_k'], quantize=options['quantize'],
                view_dtype=options['view_dtype'],
                rules=dict(keep_max_mu=economic.KEEP_MAX_MU, view_max_mu=economic.VIEW_MAX_MU,
                           view_norm_eps=economic.VIEW_NORM_EPS, max_width=economic.MAX_WIDTH,
                           score_offset=economic.SCORE_OFFSET,
                           reference='iSEE-Laboratory/EconomicGrasp@7361bb6 '
                                     'dataset/generate_economic.py'),
                scenes=scenes)


def open_economic_labels(store: LabelStore, top_k: int = 300, quantize: bool = True,
                         view_dtype: str = 'uint16', build: bool = True,
                         force: bool = False) -> EconomicStore:
    """Open the economic labels of an opened label store, building them (as a new version,
    atomically) when missing, stale (derived from another label-store version) or ``force``."""
    if view_dtype not in economic.VIEW_DTYPES:
        raise ValueError(f'view_dtype={view_dtype!r}: expected one of {economic.VIEW_DTYPES}')
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f'top_k={top_k!r}: expected a positive int')
    if not os.path.isdir(store.path):
        raise LabelStoreError(f'economic labels are derived from a local label store; '
                              f'{store.path} is not a folder')
    options = dict(top_k=top_k, quantize=bool(quantize), view_dtype=view_dtype)

    def stale(manifest: dict) -> Optional[str]:
        if manifest.get('format_version') != FORMAT_VERSION:
            return f'format version {manifest.get("format_version")}, expected {FORMAT_VERSION}'
        if manifest.get('label_store') != os.path.basename(store.path):
            return (f'it was derived from label store version {manifest.get("label_store")}, '
                    f'the current one is {os.path.basename(store.path)}')
        if {k: manifest.get(k) for k in options} != options:
            return 'it was built with other options'
        return None

    return open_or_build(economic_folder(store, **options), 'economic labels', LabelStoreError,
                         lambda v: read_manifest(v, LabelStoreError), stale, lambda tmp: _build_into(tmp, store, options),
                         EconomicStore, build=build, force=force,
                         rebuild_hint='Rebuild it with `python tools/data/'
                                      'build_economic_labels.py DATA_ROOT`')
