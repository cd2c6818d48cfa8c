"""The scale statistic of Scale-Balanced-Grasp: a histogram of grasp widths over a data recipe.

For every kept label point of the first ``num_frames`` frames of a training pipeline, the width
of its best grasp (largest ln(u_max/μ), i.e. smallest valid μ; first cell on ties) is counted in
32 linear bins from 0.003 to 0.1 m. It is a derived asset: cached under the label store cache,
keyed by the recipe (dataset selection and ``SampleGraspLabels.config()``, which leaves out
``grids``), so dense and deferred runs share one file.
"""
import hashlib
import json
import os
from typing import Dict, Optional, Sequence

import numpy as np
import torch
from mmengine.logging import print_log

from mmgrasp.storage.labels.store import default_cache_dir
from mmgrasp.structures.grasp_labels import ObjectGraspLabels, gather_grids
from mmgrasp.structures.label_visibility import resolved_grasp_labels
from mmgrasp.geometry.grasp_frames import GRASP_MAX_WIDTH

DEFAULT_EDGES = np.linspace(0.003, 0.1, 33)


def best_grasp_widths(objects: Sequence[ObjectGraspLabels]) -> np.ndarray:
    """Width of the best valid grasp of every label point (points without one are skipped)."""
    if not objects:
        return np.zeros(0, np.float32)
    owner = torch.cat([torch.full((o.num_points,), i, dtype=torch.int64)
                       for i, o in enumerate(objects)])
    rows = torch.cat([torch.arange(o.num_points) for o in objects])
    mu = gather_grids(objects, 'scores', owner, rows).flatten(1)
    widths = gather_grids(objects, 'widths', owner, rows).flatten(1)
    valid = (mu > 0) & (widths <= GRASP_MAX_WIDTH)
    collision = gather_grids(objects, 'collision', owner, rows)
    if collision is not None:  # collision='mask': collided grasps are invalid, as 'zero_scores'
        valid &= ~collision.flatten(1)
    ranked = torch.where(valid, -mu, torch.full_like(mu, -float('inf')))
    best = ranked.argmax(dim=1)
    keep = valid.any(dim=1)
    return widths[torch.arange(len(best)), best][keep].numpy()


def recipe_key(recipe: dict) -> str:
    return hashlib.sha1(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()[:16]


def statistic_path(recipe: dict, cache_dir: Optional[str] = None) -> str:
    return os.path.join(cache_dir or default_cache_dir(), 'derived',
                        f'scale_statistic-{recipe_key(recipe)}.json')


def compute_scale_statistic(dataset, num_frames: int,
                            edges: np.ndarray = DEFAULT_EDGES) -> Dict[str, list]:
    """Histogram over the first ``num_frames`` samples (epoch 0) of ``dataset``."""
    num_frames = min(num_frames, len(dataset))
    counts = np.zeros(len(edges) - 1, np.int64)
    for i in range(num_frames):
        sample = dataset[(0, i)]
        widths = best_grasp_widths(resolved_grasp_labels(sample['data_samples']))
        counts += np.histogram(widths, bins=edges)[0]
        if (i + 1) % max(1, num_frames // 10) == 0 or i + 1 == num_frames:
            print_log(f'scale statistic: {i + 1}/{num_frames} frames', logger='current')
    return dict(interval=[float(e) for e in edges], num=[int(c) for c in counts])


def load_or_compute_scale_statistic(dataset, recipe: dict, num_frames: int,
                                    cache_dir: Optional[str] = None) -> Dict[str, list]:
    """The cached statistic of ``recipe``, computed (with progress) and cached when missing."""
    path = statistic_path(dict(recipe, num_frames=num_frames), cache_dir)
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    print_log(f'scale statistic missing ({path}); computing it from {num_frames} frames',
              logger='current')
    statistic = compute_scale_statistic(dataset, num_frames)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f'{path}.tmp-{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump(dict(statistic, recipe=recipe), f)
    os.rename(tmp, path)
    return statistic
