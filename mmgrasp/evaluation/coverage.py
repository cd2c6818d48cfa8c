"""How much of the official test split an evaluation covered, and the label that says so.

Published GraspNet-1Billion AP is the mean over every frame (256) of every scene (30) of a split.
An evaluation of fewer scenes (a partial download) or fewer frames (a stride, a frame list, the
first few frames) gives a number on another sample of frames; the printed table, the JSON and
the visualisation backends carry :func:`coverage`'s label, the caller warns
(:func:`check_coverage`), and ``require_complete`` turns it into an error.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, List, Optional, Sequence

FRAMES_PER_SCENE = 256
TEST_SPLITS = {'seen': range(100, 130), 'similar': range(130, 160), 'novel': range(160, 190)}
_SPLIT_NAMES = {'all': tuple(TEST_SPLITS), 'test': tuple(TEST_SPLITS),
                **{k: (k, ) for k in TEST_SPLITS}, **{f'test_{k}': (k, ) for k in TEST_SPLITS}}


class IncompleteEvaluation(ValueError):
    """``require_complete`` and the evaluation does not cover its whole split."""


def split_names(split: Optional[str]) -> Optional[tuple]:
    """('seen', ...) for 'seen' / 'test_seen' / 'test' / 'all'; None for None."""
    if split is None:
        return None
    if split not in _SPLIT_NAMES:
        raise ValueError(f'split={split!r}: expected one of {sorted(_SPLIT_NAMES)}')
    return _SPLIT_NAMES[split]


def describe_frames(frames: Sequence[int]) -> str:
    """'0-255', '0-250 step 10', '0, 3, 7-9'."""
    frames = sorted(set(int(f) for f in frames))
    if not frames:
        return 'none'
    if len(frames) > 2:
        steps = {b - a for a, b in zip(frames, frames[1:])}
        if len(steps) == 1 and steps != {1}:
            return f'{frames[0]}-{frames[-1]} step {steps.pop()}'
    runs: List[List[int]] = []
    for f in frames:
        if runs and f == runs[-1][1] + 1:
            runs[-1][1] = f
        else:
            runs.append([f, f])
    return ', '.join(str(a) if a == b else f'{a}-{b}' for a, b in runs)


def coverage(frames: Dict[int, Iterable[int]], split: Optional[str] = None) -> dict:
    """What ``frames`` ({scene: evaluated frames}) covers of ``split`` (None: of the test
    splits its scenes belong to).

    Returns dict(complete, label, frames, official_frames, splits={name: dict(scenes,
    official_scenes, frames, official_frames)}, other_scenes, details). ``label`` is '' when
    complete, else "sampled: N of M frames, not comparable with published AP"; ``details``
    names the scenes and frames.
    """
    frames = {int(s): sorted(set(int(f) for f in fs)) for s, fs in frames.items()}
    names = split_names(split)
    if names is None:
        names = tuple(k for k, ids in TEST_SPLITS.items() if any(s in ids for s in frames))
    splits, details = {}, []
    for name in names:
        ids = TEST_SPLITS[name]
        scenes = [s for s in sorted(frames) if s in ids]
        n = sum(len(frames[s]) for s in scenes)
        splits[name] = dict(scenes=scenes, official_scenes=len(ids), frames=n,
                            official_frames=len(ids) * FRAMES_PER_SCENE)
        if len(scenes) < len(ids) or n < len(ids) * FRAMES_PER_SCENE:
            details.append(f'{name}: {len(scenes)} of {len(ids)} scenes'
                           + (f' ({_scene_list(scenes)}), frames {_frames_of(frames, scenes)}'
                              if scenes else ''))
    other = [s for s in sorted(frames) if not any(s in TEST_SPLITS[k] for k in names)]
    if other:
        where = f'the {"/".join(names)} split' if names else 'the test splits'
        details.append(f'scenes {_scene_list(other)} (outside {where}), frames '
                       f'{_frames_of(frames, other)}')
    n = sum(len(v) for v in frames.values())
    official = sum(v['official_frames'] for v in splits.values()) + \
        len(other) * FRAMES_PER_SCENE
    complete = not details
    label = '' if complete else \
        f'sampled: {n} of {official} frames, not comparable with published AP'
    return dict(complete=complete, label=label, frames=n, official_frames=official,
                splits=splits, other_scenes=other, details='; '.join(details),
                frame_ids={str(s): fs for s, fs in frames.items()})


def check_coverage(cov: dict, require_complete: bool, what: str = 'evaluation') -> str:
    """The warning for an incomplete evaluation (its label and details; '' when complete),
    which the caller shows; raises :class:`IncompleteEvaluation` when ``require_complete``."""
    if cov['complete']:
        return ''
    message = f'{what}: {cov["label"]} ({cov["details"]})'
    if require_complete:
        raise IncompleteEvaluation(message + '; require_complete is set')
    return message


#: What a frame without a dump file does: stop the evaluation naming the file ('error',
#: graspnetAPI's behaviour: it cannot load the file), or score 0 ('zero', graspclutter6dAPI's
#: ``eval_scene``, which skips it and leaves its accuracy at zero).
MISSING_DUMPS = ('error', 'zero')


def missing_dumps(frames: Dict[int, Sequence[int]], path_of: Callable[[int, int], str],
                  rule: str = 'error', layout: str = '') -> Optional[dict]:
    """The frames of ``frames`` ({scene: frames}) whose dump ``path_of(scene, frame)`` is not
    a file, checked before anything is evaluated.

    ``rule`` 'error' raises FileNotFoundError naming the first missing file, how many are
    missing and the fix (``layout``: the dump naming expected, so that a folder written in
    the other dataset's naming is recognised); 'zero' returns None when none is missing, else
    dict(rule, count, frames={scene: frames}, label) for the table and the JSON: those frames
    score 0 and the figures say so."""
    if rule not in MISSING_DUMPS:
        raise ValueError(f'missing_dumps={rule!r}: expected one of {MISSING_DUMPS}')
    missing = {s: [f for f in fs if not os.path.isfile(path_of(s, f))] for s, fs in frames.items()}
    missing = {s: fs for s, fs in missing.items() if fs}
    count, total = sum(map(len, missing.values())), sum(len(fs) for fs in frames.values())
    if not count:
        return None
    where = '; '.join(f'scene {s}: frames {describe_frames(fs)}' for s, fs in missing.items())
    if rule == 'error':
        first = next(iter(missing))
        raise FileNotFoundError(
            f'{path_of(first, missing[first][0])}: no dump for this frame ({count} of {total} '
            f'frames have none: {where}). Dumps are {layout or "named by scene and frame"}: '
            f'check the folder, its naming and the camera, or pass --missing-dumps zero '
            f'(missing_dumps=\'zero\') to score them 0 as graspclutter6dAPI does')
    return dict(rule=rule, count=count, frames={str(s): fs for s, fs in missing.items()},
                label=f'{count} of {total} frames had no dump and scored 0 ({where})')


def _scene_list(scenes: Sequence[int]) -> str:
    return describe_frames(scenes)


def _frames_of(frames: Dict[int, List[int]], scenes: Sequence[int]) -> str:
    lists = {tuple(frames[s]) for s in scenes}
    if len(lists) == 1:
        return describe_frames(lists.pop()) + (' of each' if len(scenes) > 1 else '')
    return 'differ per scene (see frame_ids)'
