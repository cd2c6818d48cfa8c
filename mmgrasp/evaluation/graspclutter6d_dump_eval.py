"""GraspClutter6D evaluation of a dump folder: graspclutter6dAPI 0.0.3's
``GraspClutter6DEval.eval_scene`` as it calls ``eval_grasp``, on GraspNetMetric's engine
(:func:`mmgrasp.evaluation.functional.evaluate_frame`).

What differs from GraspNet-1Billion's protocol (graspclutter6dAPI ``graspclutter6d_eval.py``):

- widths clipped to [0, 0.14] (not 0.1);
- a background filter before NMS: grasps whose centre is 5 cm or farther from every 8 mm
  voxel-sampled model point of the frame (``compute_point_distance`` < 0.05 keeps) are dropped;
- no table points in the collision check (``eval_scene`` passes none to ``eval_grasp``);
- models and dex-net SDFs of annotation 0's ``scene_gt`` instances (duplicates included, in
  order), poses per frame from ``scene_gt.json`` in float64;
- 13 annotations a scene and camera, a missing dump scoring zeros (here only with
  ``missing_dumps='zero'``; by default a missing dump is an error naming the file, as on
  GraspNet-1Billion); dumps ``DUMP/%06d/<camera>/%06d.npy`` (scene id, real camera name,
  image id);
- AP over ``split_info/grasp_test_scene_ids.json``.

The API's other collision path (``collision_detection_per_object_optimized``, torch) adds an
approach-angle filter (grasp x-axis within 75° of the camera z axis); ``eval_scene`` does not use
it and neither does this module. The API caches dex-net models as pickles inside the dataset
(``dex_models/``); this module only reads the dataset.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from mmgrasp.datasets.graspclutter6d_reader import NUM_ANNOTATIONS, GraspClutter6DReader
from mmgrasp.geometry import transform_points

from .coverage import describe_frames
from .functional import EVAL_FRICTION_COEFFICIENTS, evaluate_frame
from .graspnet_dump_eval import EvaluationError, load_dump
from .scene_models import cached_model_points, cached_sdf

EVALUATOR_VERSION = 'mmgrasp-graspclutter6d-1 (graspclutter6dAPI 0.0.3 eval_scene rules)'
TOP_K = 50
MAX_WIDTH = 0.14
BACKGROUND_DISTANCE = 0.05
_DISTANCE_CHUNK = 256  # grasps per block of the (grasps x model points) distance matrix


def dump_path(dump_dir: str, scene: int, camera: str, image: int) -> str:
    return os.path.join(dump_dir, f'{scene:06d}', camera, f'{image:06d}.npy')


def background_mask(grasps: np.ndarray, posed_models: List[np.ndarray],
                    distance: float = BACKGROUND_DISTANCE) -> np.ndarray:
    """(N,) bool: grasp centre closer than ``distance`` to some posed model point (the API's
    ``np.min(compute_point_distance(...), axis=1) < 0.05``, in blocks of grasps)."""
    points = np.concatenate(posed_models, axis=0)
    centres = grasps[:, 13:16]
    closest = np.empty(len(grasps))
    for start in range(0, len(grasps), _DISTANCE_CHUNK):
        block = centres[start:start + _DISTANCE_CHUNK]
        closest[start:start + len(block)] = np.linalg.norm(
            block[:, None, :] - points[None, :, :], axis=-1).min(axis=1)
    return closest < distance


class GC6DSceneInputs:
    """One scene's models (voxel-sampled points) and SDFs in annotation 0's ``scene_gt`` order,
    and each frame's float64 poses."""

    def __init__(self, root: str, camera: str, scene: int,
                 sdf_sample_seed: Optional[int] = None):
        self.reader = GraspClutter6DReader(root, camera)
        self.scene = scene
        self.object_ids, _ = self.reader.instances(scene, 0)
        self.models = [cached_model_points(self.reader.model_points_path(int(o)))
                       for o in self.object_ids]
        sdfs: Dict[int, object] = {}
        rs = None if sdf_sample_seed is None else np.random.RandomState(sdf_sample_seed)
        for obj in self.object_ids:  # a duplicate shares its twin's SDF (and surface sample)
            obj = int(obj)
            if obj not in sdfs:
                sdf = cached_sdf(self.reader.model_sdf_path(obj))
                if rs is not None:
                    sdf = sdf.with_surface_sample(
                        sdf.surface_cells[rs.choice(len(sdf.surface_cells), 1000)])
                sdfs[obj] = sdf
        self.sdfs = [sdfs[int(o)] for o in self.object_ids]

    def poses(self, frame: int) -> List[np.ndarray]:
        ids, poses = self.reader.instances(self.scene, frame)
        if ids.tolist() != self.object_ids.tolist():
            raise ValueError(f'{self.reader.frame_path(self.scene, "meta", frame)}: annotation '
                             f'{frame} lists obj_ids {(ids + 1).tolist()}, annotation 0 '
                             f'{(self.object_ids + 1).tolist()}')
        return list(poses)


def evaluate_gc6d_frame(grasps: np.ndarray, inputs: GC6DSceneInputs, frame: int,
                        top_k: int = TOP_K) -> dict:
    """The body of ``eval_scene``'s loop for one frame's dumped rows: clip widths, drop the
    background, then ``eval_grasp`` without a table (:func:`evaluate_frame`)."""
    grasps = np.array(grasps).reshape(-1, 17)
    grasps[:, 1] = np.clip(grasps[:, 1], 0, MAX_WIDTH)
    poses = inputs.poses(frame)
    if len(grasps):
        posed = [transform_points(m, p) for m, p in zip(inputs.models, poses)]
        grasps = grasps[background_mask(grasps, posed, BACKGROUND_DISTANCE)]
    return evaluate_frame(grasps, inputs.models, inputs.sdfs, poses, None, top_k,
                          max_width=MAX_WIDTH)


def evaluate_scene(root: str, dump_dir: str, camera: str, scene: int,
                   frames: Optional[Sequence[int]] = None, missing_dumps: str = 'error',
                   sdf_sample_seed: Optional[int] = None, details: Optional[dict] = None
                   ) -> np.ndarray:
    """(len(frames), 50, 6) accuracy of one scene's ``frames`` (annotation indices; default
    every annotation of the camera). A frame without a dump is an error, or scores zeros with
    ``missing_dumps='zero'`` (``eval_scene``'s rule). With ``details``, per frame (image id)
    the kept grasps, their scores and collision masks are stored under
    ``grasps_/scores_/collision_%06d_%06d`` (scene, image)."""
    frame = 0
    try:
        inputs = GC6DSceneInputs(root, camera, scene, sdf_sample_seed)
        if frames is None:
            frames = range(inputs.reader.num_frames(scene))
        out = np.zeros((len(frames), TOP_K, len(EVAL_FRICTION_COEFFICIENTS)))
        for n, frame in enumerate(frames):
            image = inputs.reader.image_id(frame)
            path = dump_path(dump_dir, scene, inputs.reader.camera, image)
            if missing_dumps == 'zero' and not os.path.isfile(path):
                continue
            result = evaluate_gc6d_frame(load_dump(path), inputs, frame)
            out[n] = result['accuracy']
            if details is not None:
                key = f'{scene:06d}_{image:06d}'
                for name in ('grasps', 'scores', 'collision'):
                    details[f'{name}_{key}'] = result[name]
        return out
    except Exception as err:  # noqa: BLE001 - re-raised with the scene and frame named
        raise EvaluationError(f'scene {scene} annotation {frame}: {type(err).__name__}: {err}') \
            from err


def _scene_job(args):
    root, dump_dir, camera, scene, frames, missing, seed = args
    return evaluate_scene(root, dump_dir, camera, scene, frames, missing, seed)


def evaluate_dump(root: str, dump_dir: str, camera: str, scenes: Optional[Iterable[int]] = None,
                  nproc: int = 1, sdf_sample_seed: Optional[int] = None,
                  frames: Optional[Dict[int, Sequence[int]]] = None,
                  missing_dumps: str = 'error') -> Dict[int, np.ndarray]:
    """{scene: (frames, 50, 6) accuracy} for ``scenes`` (default: the test split's,
    ``grasp_test_scene_ids.json``) and their ``frames`` (default: every annotation), scenes in
    ``nproc`` processes; a missing dump as :func:`evaluate_scene` says."""
    reader = GraspClutter6DReader(root, camera)
    scenes = reader.scene_ids('test') if scenes is None else [int(s) for s in scenes]
    jobs = [(root, dump_dir, reader.camera, s, None if frames is None else list(frames[s]),
             missing_dumps, sdf_sample_seed) for s in scenes]
    if nproc <= 1 or len(jobs) <= 1:
        results = [_scene_job(j) for j in jobs]
    else:
        ctx = mp.get_context('fork' if 'fork' in mp.get_all_start_methods() else 'spawn')
        with ctx.Pool(min(nproc, len(jobs))) as pool:
            results = pool.map(_scene_job, jobs)
    return dict(zip(scenes, results))


def summarize(accuracy: Dict[int, np.ndarray]) -> Dict[str, float]:
    """AP, AP0.4, AP0.8 in percent (``eval_all``: means over scenes, annotations, k and μ) and
    the number of frames (13 a scene)."""
    if not accuracy:
        return {}
    a = np.concatenate([accuracy[s] for s in sorted(accuracy)], axis=0)
    return {'AP': 100.0 * float(a.mean()), 'AP0.4': 100.0 * float(a[:, :, 1].mean()),
            'AP0.8': 100.0 * float(a[:, :, 3].mean()), 'frames': int(len(a))}


def coverage(run: Dict[int, List[int]], test_split: List[int]) -> dict:
    """What ``run`` ({scene: annotation indices run}) covers of the test split's
    ``13 × scenes`` frames, as :func:`mmgrasp.evaluation.coverage.coverage` says it for
    GraspNet-1Billion: ``complete``, ``label`` ('' or "sampled: N of M frames, ..."),
    ``frames``, ``official_frames``, ``details``."""
    official = NUM_ANNOTATIONS * len(test_split)
    frames = sum(len(f) for f in run.values())
    complete = sorted(run) == sorted(test_split) and all(
        len(f) == NUM_ANNOTATIONS for f in run.values())
    label = '' if complete else \
        f'sampled: {frames} of {official} frames, not comparable with published AP'
    details = '; '.join(f'scene {s}: annotations {describe_frames(f)}' for s, f in run.items())
    missing = sorted(set(test_split) - set(run))
    if missing:
        details += f'; test scenes not run: {", ".join(map(str, missing))}'
    return dict(complete=complete, label=label, frames=frames, official_frames=official,
                details=details)
