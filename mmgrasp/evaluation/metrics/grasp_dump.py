"""GraspDumpMetric: write predicted grasps in GraspNet's dump layout for the usual evaluators."""
import os
from typing import List, Sequence

import numpy as np
from mmengine.evaluator import BaseMetric

from mmgrasp.registry import METRICS


def save_grasps(path: str, sample: dict) -> int:
    """Write one sample's ``pred_grasps`` ((M, 17) float32) to ``path`` under a temporary name
    of this process, then rename; returns the number of grasps. Processes that dump the same
    frame (a rerun next to a running test) never write into each other's file."""
    grasps = np.ascontiguousarray(sample['pred_grasps'].cpu().numpy(), dtype=np.float32)
    if grasps.ndim != 2 or grasps.shape[1] != 17:
        raise ValueError(f'pred_grasps of scene {sample["scene"]} frame {sample["frame"]} '
                         f'has shape {grasps.shape}, expected (M, 17)')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f'{path}.tmp-{os.getpid()}'
    with open(tmp, 'wb') as f:
        np.save(f, grasps)
    os.replace(tmp, path)
    return len(grasps)


def write_frame_dump(dump_dir: str, sample: dict) -> int:
    """Write one sample's ``pred_grasps`` to its dump file; returns the number of grasps."""
    folder = os.path.join(dump_dir, f'scene_{int(sample["scene"]):04d}', sample['camera'])
    return save_grasps(os.path.join(folder, f'{int(sample["frame"]):04d}.npy'), sample)


@METRICS.register_module()
class GraspDumpMetric(BaseMetric):
    """Write ``<dump_dir>/scene_%04d/<camera>/%04d.npy`` per frame: (M, 17) float32 rows of
    score, width, height, depth, rotation (3×3 row-major), translation, object id — the format
    graspnetAPI's GraspGroup and its evaluation read. Each file is written under a temporary
    name and renamed; the metric reports how many frames were written.

    Args:
        dump_dir: output root.
    """

    default_prefix = 'dump'

    def __init__(self, dump_dir: str, collect_device: str = 'cpu', prefix=None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.dump_dir = dump_dir

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            self.results.append(write_frame_dump(self.dump_dir, sample))

    def compute_metrics(self, results: List[int]) -> dict:
        return dict(frames=len(results), grasps=int(sum(results)))
