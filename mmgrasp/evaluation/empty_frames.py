"""Frames whose dump holds no grasp: counted, named and explained, never silently scored 0.

A frame with an empty dump scores 0 (graspnetAPI's rule); a model whose filters keep nothing
(an untrained or barely trained one: no seed predicted on an object, every grasp removed by
the collision filter) therefore prints an AP table of zeros that looks like a bad detector.
:func:`empty_dump_frames` finds those frames in a dump folder, :func:`empty_frame_figures`
counts them per split (``empty_frames``, ``seen/empty_frames`` ... beside ``frames``),
:func:`empty_frames_record` is what the JSON keeps, :func:`empty_frames_message` the warning;
a test loop's metric gives :func:`model_empty_frames` its per-frame counts (:func:`frame_counts`)
and gets the record and a warning with the likely cause.
"""
from __future__ import annotations

import os
import warnings
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from mmengine.logging import MMLogger

from .coverage import TEST_SPLITS, describe_frames
from .graspnet_dump_eval import dump_path

#: The likely cause of an empty model dump, for a run that cannot tell more (a dump folder).
DUMP_HINT = ('A model dumps no grasp for a frame when its filters keep none (no seed predicted '
             'on an object, every grasp removed by the collision filter): the model may be '
             'untrained or trained too briefly.')


def dump_rows(path: str) -> int:
    """Grasps in a dump file (0 for an empty array of any shape, as ``load_dump`` reads it);
    the rows are memory-mapped, not read."""
    grasps = np.load(path, mmap_mode='r')
    return int(grasps.shape[0]) if grasps.size else 0


def empty_dump_frames(dump_dir: str, camera: str, frames: Mapping[int, Iterable[int]],
                      path_of: Optional[Callable[[int, int], str]] = None
                      ) -> Dict[int, List[int]]:
    """{scene: frames} of ``frames`` whose dump holds no grasp: ``path_of(scene, frame)``,
    by default GraspNet-1Billion's ``scene_%04d/<camera>/%04d.npy`` under ``dump_dir``. Missing
    files are not listed: the evaluation names them."""
    if path_of is None:
        def path_of(scene: int, frame: int) -> str:
            return dump_path(dump_dir, scene, camera, frame)
    empty: Dict[int, List[int]] = {}
    for scene, scene_frames in frames.items():
        for frame in scene_frames:
            path = path_of(int(scene), int(frame))
            if os.path.isfile(path) and dump_rows(path) == 0:
                empty.setdefault(int(scene), []).append(int(frame))
    return {s: sorted(fs) for s, fs in sorted(empty.items())}


def empty_frame_figures(empty: Mapping[int, Sequence[int]],
                        scenes: Iterable[int]) -> Dict[str, int]:
    """``empty_frames`` over the evaluated ``scenes`` and ``<split>/empty_frames`` for each
    test split they touch (the keys ``summarize`` gives ``frames`` under)."""
    scenes = [int(s) for s in scenes]
    empty = {int(s): fs for s, fs in empty.items()}  # a record's frame_ids have str keys
    out = {'empty_frames': sum(len(empty.get(s, ())) for s in scenes)}
    for split, ids in TEST_SPLITS.items():
        if any(s in ids for s in scenes):
            out[f'{split}/empty_frames'] = sum(len(empty.get(s, ())) for s in scenes
                                               if s in ids)
    return out


def empty_frames_record(empty: Mapping[int, Sequence[int]], frames: int) -> dict:
    """What the JSON keeps: ``count`` of ``frames`` evaluated, ``frame_ids`` per scene and a
    readable ``details`` ('scene 100: 0-3; scene 130: 1')."""
    empty = {int(s): sorted(int(f) for f in fs) for s, fs in empty.items() if fs}
    details = '; '.join(f'scene {s}: {describe_frames(fs)}' for s, fs in sorted(empty.items()))
    return dict(count=sum(map(len, empty.values())), frames=int(frames),
                frame_ids={str(s): fs for s, fs in sorted(empty.items())}, details=details)


def empty_frames_message(record: Mapping, what: str, cause: Optional[str] = None) -> str:
    """The warning for a record with empty frames ('' when none): how many, which, that they
    score 0, and ``cause`` (default :data:`DUMP_HINT`)."""
    if not record['count']:
        return ''
    return (f'{what}: {record["count"]} of {record["frames"]} frames have no grasp in the dump '
            f'({record["details"]}); each scores AP 0. {cause or DUMP_HINT}')


def model_cause(decoded_none: int, all_collided: int, settings: Mapping[str, object]) -> str:
    """Why a model's test run left frames empty, from what its test loop saw per frame:
    ``decoded_none`` frames where the model decoded no grasp (its objectness filter kept no
    seed), ``all_collided`` frames where the collision filter removed every decoded grasp.
    ``settings`` are ``GraspNetMetric``'s (``objectness filter``, ``collision
    threshold``)."""
    parts = []
    if decoded_none:
        why = ("no seed had P(object) > 0.5, so the objectness filter kept none"
               if settings.get('objectness filter') == 'on' else 'its filters kept no seed')
        parts.append(f'in {decoded_none} the model decoded no grasp ({why})')
    if all_collided:
        parts.append(f'in {all_collided} the collision filter (threshold '
                     f'{settings.get("collision threshold", "on")}) removed every grasp')
    if not parts:
        return DUMP_HINT
    return ('Of these frames, ' + '; '.join(parts) + '. The model may be untrained or trained '
            'too briefly.')


def frame_counts(sample: Mapping, dumped: int) -> Tuple[int, int]:
    """(grasps dumped, grasps the model decoded before its collision filter) of one test
    sample: ``grasps_before_collision`` where the filter ran and recorded it, else ``dumped``."""
    return int(dumped), int(sample.get('grasps_before_collision', dumped))


def model_empty_frames(counts: Mapping[Tuple[int, int], Tuple[int, Optional[int]]], what: str,
                       settings: Mapping[str, object]) -> dict:
    """The :func:`empty_frames_record` of a test run from ``{(scene, frame): (dumped,
    decoded)}`` (``decoded`` None where unknown); frames with an empty dump are warned about
    (log and ``warnings``) with :func:`model_cause`."""
    empty: Dict[int, List[int]] = {}
    decoded_none = all_collided = 0
    for (scene, frame), (dumped, decoded) in sorted(counts.items()):
        if dumped == 0:
            empty.setdefault(scene, []).append(frame)
            decoded_none += decoded == 0
            all_collided += bool(decoded)
    record = empty_frames_record(empty, len(counts))
    message = empty_frames_message(record, what,
                                   model_cause(decoded_none, all_collided, settings))
    if message:
        MMLogger.get_current_instance().warning(message)
        warnings.warn(message, stacklevel=3)
    return record
