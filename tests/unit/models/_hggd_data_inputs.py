"""HGGD grasp records for the session's synthetic frames. The per-image grasp store projects
GraspNet-1Billion's grasps with HGGD's hard-coded intrinsics at 1280 x 720, so none fall in the
320 x 180 session frames; these records are made on the frames themselves.

- :func:`make_record` draws a plausible per-image grasp record (the store's fields and dtypes)
  on a frame: centres on the objects, some in depth holes, θ over (−π, π], both scores.
- :class:`RecordStore` serves records as the per-image grasp store does (``frame(s, f)``).
"""
from typing import Dict, Optional

import numpy as np

from mmgrasp.datasets.transforms.hggd import GRASP_FIELDS


def make_record(depth: np.ndarray, seg: Optional[np.ndarray], count: int,
                seed: int) -> Dict[str, np.ndarray]:
    """``count`` grasp rows on a frame (native pixels): centres on segmented pixels (or
    anywhere when ``seg`` is None), a tenth in depth holes when the frame has any."""
    rng = np.random.default_rng(seed)
    height, width = depth.shape
    scale = width / 1280
    candidates = np.flatnonzero(seg.reshape(-1) > 0) if seg is not None else \
        np.arange(depth.size)
    holes = np.flatnonzero(depth.reshape(-1) == 0)
    pick = rng.choice(candidates, count)
    if len(holes):
        some = rng.random(count) < 0.1
        pick[some] = rng.choice(holes, int(some.sum()))
    centers = np.stack([pick % width, pick // width], -1) + rng.uniform(0, 1, (count, 2))
    observed = depth.reshape(-1)[pick].astype(np.float64)
    z = np.where(observed > 0, observed, 600.) + rng.normal(0, 15, count)
    thetas = rng.uniform(-np.pi, np.pi, count).astype(np.float32)
    widths = rng.uniform(20, 150, count).astype(np.float32) * np.float32(scale)
    record = dict(
        centers_2d=centers, thetas_rad=thetas,
        opens_2d=centers + np.stack([-widths / 2 * np.cos(thetas), widths / 2 * np.sin(thetas)],
                                    -1),
        gammas_rad=rng.uniform(-1.2, 1.2, count), betas_rad=rng.uniform(-1.2, 1.2, count),
        widths_2d=widths, heights_2d=rng.uniform(10, 40, count).astype(np.float32),
        scores_from_6d=rng.choice(np.array([0.9, 1.0], np.float32), count),
        object_ids=(seg.reshape(-1)[pick] - 1 if seg is not None
                    else np.zeros(count)).astype(np.int32),
        center_z_depths=z)
    return {k: record[k].astype(dtype) for k, (dtype, _) in GRASP_FIELDS.items()}


class RecordStore:
    """The per-image grasp store's reader interface over records made by :func:`make_record`
    for every frame of a reader (``count`` rows; ``counts`` per (scene, frame) overrides)."""

    def __init__(self, reader, count: int = 300, counts: Optional[dict] = None):
        self.reader, self.count, self.counts = reader, count, counts or {}
        self.cache: Dict[tuple, Dict[str, np.ndarray]] = {}

    def frame(self, scene: int, frame: int) -> Dict[str, np.ndarray]:
        key = (scene, frame)
        if key not in self.cache:
            depth = self.reader.load_depth(scene, frame)
            seg = self.reader.load_segmentation(scene, frame)
            self.cache[key] = make_record(depth, seg, self.counts.get(key, self.count),
                                          seed=1000 * scene + frame)
        return self.cache[key]

