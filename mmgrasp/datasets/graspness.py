"""GSNet's point graspness labels, computed from the label store (GSNet generate_graspness.py).

For every label point of every object of a frame, the share of its V·A·D cells with
0 < μ ≤ ``max_mu`` and no scene collision is its graspness. Each masked scene point (depth > 0 &
workspace, the same mask ``LoadGraspScene`` builds) takes the graspness of its nearest label
point in camera coordinates (no distance cutoff: table points get values too), then the frame is
min–max normalised. Files follow the reference layout ``graspness/scene_%04d/<camera>/%04d.npy``,
(N_masked, 1), rows in masked-cloud order.
"""
import os
import time
from typing import Dict, Iterable, Optional

import numpy as np
from mmengine.logging import print_log
from scipy.spatial import cKDTree

from mmgrasp.storage.frames.store import masked_pixels, pixel_points
from mmgrasp.storage.labels.maps import MapCache
from mmgrasp.storage.labels.store import LabelStore, open_label_store, unpack_rows
from .graspnet_reader import GraspNetReader
from .layouts import open_reader

_CHUNK_ROWS = 256


def point_graspness(store: LabelStore, maps: MapCache, scene: int, instance: int,
                    max_mu: float = 0.8) -> np.ndarray:
    """(Np,) graspness of every label point of one object instance of a scene."""
    obj = store.scenes[scene].object_ids[instance]
    scores = maps.get(store.object_file(obj, 'scores'))
    collision = maps.get(store.collision_file(scene))
    offset = store.collision_row_offset(scene, instance)
    cells = int(np.prod(store.grid))
    out = np.empty(len(scores), np.float32)
    for start in range(0, len(scores), _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, len(scores))
        mu = scores[start:stop].reshape(stop - start, -1)
        collided = unpack_rows(collision[offset + start:offset + stop], store.grid)
        valid = (mu > 0) & (mu <= max_mu) & ~collided.reshape(stop - start, -1)
        out[start:stop] = valid.sum(axis=1) / cells
    return out


def frame_graspness(reader: GraspNetReader, store: LabelStore, scene: int, frame: int,
                    per_instance: Dict[int, np.ndarray], outlier: float = 0.02) -> np.ndarray:
    """(N_masked, 1) float32 normalised graspness of the masked points of one frame."""
    depth = reader.load_depth(scene, frame)
    seg = reader.load_segmentation(scene, frame)
    meta = reader.load_meta(scene, frame)
    # only pixels with a reading are back-projected (the loader's rule, elementwise the same)
    pixels = masked_pixels(depth, seg, meta.intrinsics, meta.factor_depth,
                           reader.trajectory(scene).camera_to_table(frame), outlier)
    masked = np.stack(pixel_points(depth.reshape(-1)[pixels], pixels, depth.shape[1],
                                   meta.intrinsics, meta.factor_depth), axis=-1)
    points, values = [], []
    for instance, (obj, pose) in enumerate(zip(meta.object_ids, meta.poses)):
        label_points = store.points(int(obj)).astype(np.float64)
        points.append(label_points @ pose[:, :3].T.astype(np.float64) + pose[:, 3])
        values.append(per_instance[instance])
    _, nearest = cKDTree(np.concatenate(points)).query(masked, k=1)
    graspness = np.concatenate(values)[nearest]
    low, high = graspness.min(), graspness.max()
    return ((graspness - low) / (high - low + 1e-12)).astype(np.float32)[:, None]


def generate_graspness(root: str, camera: str = 'realsense', scenes: Optional[Iterable[int]] = None,
                       cache_dir: Optional[str] = None, max_mu: float = 0.8,
                       overwrite: bool = False) -> int:
    """Write the graspness files of ``scenes`` (default: all train scenes on disk); returns how
    many were written. Each file is written under a temporary name and renamed."""
    reader = open_reader(root, camera)
    store = open_label_store(reader, cache_dir)
    maps = MapCache(read_ahead=False)
    scenes = list(scenes) if scenes is not None else reader.scene_ids('train')
    written, t0 = 0, time.time()
    for scene in scenes:
        per_instance = {i: point_graspness(store, maps, scene, i, max_mu)
                        for i in range(len(store.scenes[scene].object_ids))}
        for frame in range(reader.num_frames(scene)):
            path = reader.graspness_path(scene, frame)
            if os.path.exists(path) and not overwrite:
                continue
            graspness = frame_graspness(reader, store, scene, frame, per_instance)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f'{path}.tmp-{os.getpid()}.npy'
            np.save(tmp, graspness)
            os.rename(tmp, path)
            written += 1
        print_log(f'graspness: scene {scene:04d} ({reader.camera}) done, {written} files, '
                  f'{time.time() - t0:.1f}s', logger='current')
    return written
