"""``GraspNetEval``: graspnetAPI's evaluation class, same methods, arguments, arrays and tuples,
computed by mmgrasp's evaluator. Codebases that call graspnetAPI switch with one import::

    from mmgrasp.evaluation import GraspNetEval   # was: from graspnetAPI import GraspNetEval
    res, ap = GraspNetEval(root, 'realsense', split='test').eval_seen(dump_folder, proc=6)

Differences from graspnetAPI (bd6783c), none in the numbers (tests/data/eval_golden):

- numpy 2 and no open3d / dexnet / grasp_nms build; processes end with the run (graspnetAPI's
  ``Pool`` can hang after the last scene), a failing or stuck frame raises an error naming the
  scene and frame (``frame_timeout``);
- a scene's frames are those with an annotation (graspnetAPI: always 0..255) and a split's
  scenes those on disk: a partial split or a scene with fewer frames is evaluated, warned about
  ("sampled: N of M frames, not comparable with published AP") or refused with
  ``require_complete=True``; graspnetAPI fails on the first missing file. ``eval_all``'s
  per-split AP is by scene id (graspnetAPI slices ``res[0:30]`` ...), NaN for a split absent;
- ``vis=True`` raises: mmgrasp opens no open3d windows; ``mmgrasp-eval --diagnose DIR`` writes
  the scenes with every evaluated gripper coloured by its outcome as PLY;
- only the evaluation methods; the dataset-browsing methods of graspnetAPI's ``GraspNet``
  base class (``loadGrasp``, ``loadScenePointCloud``, ...) are not provided.
"""
from __future__ import annotations

import math
import os
import warnings
from typing import List, Optional, Sequence

import numpy as np

from mmgrasp.storage.source import CAMERAS

from .cli import present_scenes
from .coverage import check_coverage, coverage
from .graspnet_dump_eval import Protocol, evaluate_dump, evaluate_scene, scene_frames

#: The splits graspnetAPI's GraspNet accepts (its constructor asserts one of them).
SPLITS = ('all', 'train', 'test', 'test_seen', 'test_similar', 'test_novel', 'custom')
_SPLIT_IDS = {'seen': range(100, 130), 'similar': range(130, 160), 'novel': range(160, 190)}


class GraspNetEval:
    """graspnetAPI's ``GraspNetEval(root, camera, split='test')``.

    Args:
        root: dataset root (``scenes/``, ``models/``).
        camera: 'realsense' or 'kinect'.
        split: kept for graspnetAPI's signature (its ``eval_*`` methods fix their scenes).
        require_complete: raise instead of warning when a split or scene is incomplete.
        frame_timeout: seconds one frame may take (None: no limit).
        sdf_sample_seed: see :func:`mmgrasp.evaluation.scene_models.scene_assets`.
    """

    def __init__(self, root: str, camera: str, split: str = 'test',
                 require_complete: bool = False, frame_timeout: Optional[float] = 600.0,
                 sdf_sample_seed: Optional[int] = None):
        # checked here, as graspnetAPI asserts them in its constructor: a typo must not wait for
        # the first eval_* call, nor read as a split without annotations
        if camera not in CAMERAS:
            raise ValueError(f'GraspNetEval: camera {camera!r}: expected one of '
                             f'{", ".join(map(repr, CAMERAS))}')
        if split not in SPLITS:
            raise ValueError(f'GraspNetEval: split {split!r}: expected one of '
                             f'{", ".join(map(repr, SPLITS))}')
        if not os.path.isdir(root):
            raise FileNotFoundError(f'GraspNetEval: dataset root {os.path.abspath(root)} does not '
                                    f'exist (or is not a folder)')
        if not os.path.isdir(os.path.join(root, 'scenes')):
            raise FileNotFoundError(f'GraspNetEval: dataset root {os.path.abspath(root)} has no '
                                    f'scenes/ folder: not a GraspNet-1Billion root')
        self.root, self.camera, self.split = root, camera, split
        self.require_complete = require_complete
        self.frame_timeout = frame_timeout
        self.sdf_sample_seed = sdf_sample_seed

    def eval_scene(self, scene_id: int, dump_folder: str, TOP_K: int = 50,  # noqa: N803
                   return_list: bool = False, vis: bool = False, max_width: float = 0.1):
        """A list of (TOP_K, 6) accuracy arrays, one per frame; with ``return_list`` also the
        kept grasps, friction scores and collision masks per frame (``[]`` for a frame
        without any), as graspnetAPI's ``eval_scene``."""
        if vis:
            raise ValueError('GraspNetEval.eval_scene(vis=True): mmgrasp opens no open3d '
                             'windows; `mmgrasp-eval ... --diagnose DIR` writes each scene '
                             'with its grippers coloured by outcome as PLY')
        frames = self._frames([scene_id])[scene_id]
        lists = ([], [], [])

        def keep(_scene, _frame, result):
            for out, key in zip(lists, ('grasps', 'scores', 'collision')):
                out.append(result[key] if len(result['grasps']) else [])
        accuracy = evaluate_scene(self.root, dump_folder, self.camera, scene_id, frames,
                                  self.sdf_sample_seed,
                                  protocol=Protocol('eval_scene', TOP_K, 10, None, max_width),
                                  on_result=keep if return_list else None)
        scene_accuracy = list(accuracy)
        return (scene_accuracy, *lists) if return_list else scene_accuracy

    def parallel_eval_scenes(self, scene_ids: Sequence[int], dump_folder: str,
                             proc: int = 2) -> List[List[np.ndarray]]:
        """Per scene, its list of (50, 6) frame accuracies; scenes in ``proc`` processes."""
        return self._run([int(s) for s in scene_ids], dump_folder, proc, None)

    def eval_seen(self, dump_folder: str, proc: int = 2):
        """(res (scenes, frames, 50, 6), ap) over the seen scenes 100-129; ap a fraction."""
        res = self._split_res('seen', dump_folder, proc)
        ap = float(np.mean(res))
        print(f'\nEvaluation Result:\n----------\n{self.camera}, AP Seen={ap}')
        return res, ap

    def eval_similar(self, dump_folder: str, proc: int = 2):
        """(res, ap) over the similar scenes 130-159."""
        res = self._split_res('similar', dump_folder, proc)
        ap = float(np.mean(res))
        print(f'\nEvaluation Result:\n----------\n{self.camera}, AP={ap}, AP Similar={ap}')
        return res, ap

    def eval_novel(self, dump_folder: str, proc: int = 2):
        """(res, ap) over the novel scenes 160-189."""
        res = self._split_res('novel', dump_folder, proc)
        ap = float(np.mean(res))
        print(f'\nEvaluation Result:\n----------\n{self.camera}, AP={ap}, AP Novel={ap}')
        return res, ap

    def eval_all(self, dump_folder: str, proc: int = 2):
        """(res over scenes 100-189, [AP, AP seen, AP similar, AP novel])."""
        scenes = self._present('all')
        res = np.array(self._run(scenes, dump_folder, proc, 'all'))
        ap = [float(np.mean(res))]
        for ids in _SPLIT_IDS.values():
            rows = [i for i, s in enumerate(scenes) if s in ids]
            ap.append(float(np.mean(res[rows])) if rows else math.nan)
        print(f'\nEvaluation Result:\n----------\n{self.camera}, AP={ap[0]}, AP Seen={ap[1]}, '
              f'AP Similar={ap[2]}, AP Novel={ap[3]}')
        return res, ap

    # ------------------------------------------------------------------------------------
    def _present(self, split: str) -> List[int]:
        scenes = present_scenes(self.root, self.camera, split)
        if not scenes:
            raise FileNotFoundError(f'{self.root}: no scene of split {split} has '
                                    f'{self.camera} annotations')
        return scenes

    def _frames(self, scenes: Sequence[int], split: Optional[str] = None) -> dict:
        """Annotated frames per scene; for a split (eval_seen ...) its coverage is checked
        (explicit scene lists, eval_scene and parallel_eval_scenes, are the caller's choice)."""
        frames = {s: scene_frames(self.root, self.camera, s) for s in scenes}
        if split is not None:
            message = check_coverage(coverage(frames, split), self.require_complete,
                                     'GraspNetEval')
            if message:
                warnings.warn(message, stacklevel=4)
        return frames

    def _run(self, scenes: List[int], dump_folder: str, proc: int,
             split: Optional[str]) -> List[List[np.ndarray]]:
        accuracy = evaluate_dump(self.root, dump_folder, self.camera, scenes,
                                 self._frames(scenes, split), nproc=proc,
                                 frame_timeout=self.frame_timeout, progress=False,
                                 sdf_sample_seed=self.sdf_sample_seed)
        return [list(accuracy[s]) for s in scenes]

    def _split_res(self, split: str, dump_folder: str, proc: int) -> np.ndarray:
        return np.array(self._run(self._present(split), dump_folder, proc, split))
