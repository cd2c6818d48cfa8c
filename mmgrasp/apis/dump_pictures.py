"""Pictures of a dump: each frame's predicted grasps on its RGB image (``tools/test.py
--show-dir``), drawn as the demo draws them (GraspNet's NMS, the best ``top_k``, score colours)."""
import os
from typing import Iterable

import cv2
import numpy as np

from mmgrasp.evaluation.functional import grasp_nms
from mmgrasp.evaluation.grasp_drawing import draw_scene, top_grasps


def write_dump_pictures(reader, frames: Iterable[tuple], dump_dir: str, show_dir: str,
                        top_k: int = 20) -> int:
    """Write ``show_dir/scene_%04d_%04d.png`` for each (scene, frame) of ``frames`` from
    ``dump_dir/scene_%04d/<camera>/%04d.npy`` (GraspNet-1Billion's dump layout); returns how
    many were written. A frame whose dump file or RGB image is missing stops with its path."""
    if top_k < 1:
        raise ValueError(f'top_k must be >= 1, got {top_k}')
    os.makedirs(show_dir, exist_ok=True)
    written = 0
    for scene, frame in frames:
        path = os.path.join(dump_dir, f'scene_{scene:04d}', reader.camera, f'{frame:04d}.npy')
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{path}: no dump of scene {scene} frame {frame}')
        grasps = np.load(path, allow_pickle=False)
        if grasps.ndim != 2 or grasps.shape[1] != 17:
            raise ValueError(f'{path}: expected (M, 17) grasps, got {grasps.shape}')
        rgb_path = reader.frame_path(scene, 'rgb', frame)
        rgb = cv2.imread(rgb_path, cv2.IMREAD_COLOR)
        if rgb is None:
            raise FileNotFoundError(f'{rgb_path}: cannot read the RGB image')
        kept = grasp_nms(grasps).astype(np.float32) if len(grasps) else grasps
        shown = top_grasps(kept, top_k)
        title = (f'scene {scene} frame {frame}: top {len(shown)} of {len(kept)} grasps after '
                 f'NMS' + (f', best {kept[0, 0]:.3f}' if len(kept) else ''))
        draw_scene(cv2.cvtColor(rgb, cv2.COLOR_BGR2RGB).astype(np.float64) / 255,
                   os.path.join(show_dir, f'scene_{scene:04d}_{frame:04d}.png'),
                   reader.load_meta(scene, frame).intrinsics, shown, title=title)
        written += 1
    return written
