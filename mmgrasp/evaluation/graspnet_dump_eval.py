"""GraspNet-1Billion evaluation of a dump folder: graspnetAPI's ``GraspNetEval.eval_scene`` per
scene, scenes in parallel processes, every scene's result written as soon as it is done.

Layout read (graspnetAPI's): ``scenes/scene_%04d/<camera>/annotations/%04d.xml`` (object id, name,
path, translation, w x y z quaternion per object), ``camera_poses.npy``, ``cam0_wrt_table.npy``;
``models/%03d/nontextured.ply`` (vertices) and ``models/%03d/textured.sdf`` (dexnet format).
Dumps: ``DUMP/scene_%04d/<camera>/%04d.npy``, (N, 17) GraspGroup rows.

Results: ``<results_dir>/scene_%04d.npz`` holds that scene's (frames, 50, 6) accuracy, its
frames, and a fingerprint of the dump files and of this evaluator; a rerun with the same inputs
reads it instead of evaluating again. Another :class:`Protocol` (the size split) keeps its own
``scene_%04d_<name>.npz``.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import math
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from mmgrasp.geometry import GRASPNET_GRIPPER, Gripper, PosedTable

from .functional import evaluate_frames
from .scene_models import (clear_asset_caches, model_dirs, read_annotation,  # noqa: F401
                           read_model, scene_assets, share_parsed_models)

EVALUATOR_VERSION = 'mmgrasp-graspnet-1 (graspnetAPI bd6783c rules)'
SPLITS = {'seen': range(100, 130), 'similar': range(130, 160), 'novel': range(160, 190)}
TOP_K = 50
# frames of a scene whose force-closure tests run as one batch (evaluate_frames): enough to
# take numpy's per-call cost off the small per-object work, few enough to stay in the cache
FRAME_BATCH = 16


class EvaluationError(RuntimeError):
    """A scene/frame that could not be evaluated; the message names both."""


class FrameTimeout(EvaluationError):
    """A frame ran past ``frame_timeout``."""


@dataclass(frozen=True)
class Protocol:
    """What :func:`evaluate_frame` is asked per frame: graspnetAPI's AP (``STANDARD``) or one
    size of Scale-Balanced-Grasp's ``evaluate_scale.py`` (``SIZE_PROTOCOLS``: widths in
    ``width_range`` after clipping, 5 grasps per object, 20 precision rows). ``gripper``: the
    gripper whose fingers and palm the collision test uses (:meth:`with_gripper` also sets
    ``max_width`` to its maximum width)."""
    name: str
    top_k: int = TOP_K
    per_object: int = 10
    width_range: Optional[Tuple[float, float]] = None
    max_width: float = 0.1
    gripper: Gripper = field(default=GRASPNET_GRIPPER, repr=False)

    def frame_options(self) -> dict:
        return dict(top_k=self.top_k, per_object=self.per_object, width_range=self.width_range,
                    max_width=self.max_width, gripper=self.gripper)

    def with_gripper(self, gripper: Gripper) -> 'Protocol':
        return replace(self, gripper=gripper, max_width=gripper.max_width)

    def key(self) -> str:
        """What the resume fingerprint hashes: the fields, and the gripper unless GraspNet's."""
        default = self.gripper.same_as(GRASPNET_GRIPPER)
        return repr(self) + ('' if default else f'|gripper {self.gripper.describe()}')


STANDARD = Protocol('standard')
SIZE_PROTOCOLS = (Protocol('small', 20, 5, (-math.inf, 0.04)),
                  Protocol('medium', 20, 5, (0.04, 0.07)),
                  Protocol('large', 20, 5, (0.07, math.inf)))


def dump_path(dump_dir: str, scene: int, camera: str, frame: int) -> str:
    return os.path.join(dump_dir, f'scene_{scene:04d}', camera, f'{frame:04d}.npy')


def load_dump(path: str, rotation_tol: float = 1e-5) -> np.ndarray:
    """A frame's (N, 17) grasps; raises ValueError naming the file for a wrong shape or for
    rotations that are not orthonormal within ``rotation_tol`` (dexnet refuses those too)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path}: no dump for this frame')
    grasps = np.load(path)
    if grasps.ndim != 2 or grasps.shape[1] != 17:
        if grasps.size == 0:
            return np.zeros((0, 17), dtype=np.float32)
        raise ValueError(f'{path}: shape {grasps.shape}, expected (N, 17) GraspGroup rows')
    rot = grasps[:, 4:13].astype(np.float64).reshape(-1, 3, 3)
    err = np.abs(np.matmul(np.swapaxes(rot, 1, 2), rot) - np.eye(3)).max(axis=(1, 2))
    bad = np.flatnonzero(~(err <= rotation_tol))
    if len(bad):
        raise ValueError(f'{path}: rows {bad[:10].tolist()} have rotations that are not '
                         f'orthonormal (|R^T R - I| up to {np.nanmax(err[bad]):.2e} > '
                         f'{rotation_tol:g}); orthonormalise them before dumping')
    return grasps


def scene_frames(root: str, camera: str, scene: int) -> List[int]:
    """Frames with an annotation XML (graspnetAPI assumes 0..255)."""
    adir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera, 'annotations')
    if not os.path.isdir(adir):
        raise FileNotFoundError(f'{adir}: no annotations for scene {scene}')
    return sorted(int(n[:-4]) for n in os.listdir(adir) if n.endswith('.xml') and n[:-4].isdigit())


# one scene ----------------------------------------------------------------------------------
class SceneInputs:
    """What :func:`evaluate_frame` takes for each frame of one scene: the scene's models and
    SDFs (read once), and per frame its dump, object poses and posed table."""

    def __init__(self, root: str, camera: str, scene: int,
                 sdf_sample_seed: Optional[int] = None):
        self.scene, self.camera = scene, camera
        _, self.models, self.sdfs = scene_assets(root, camera, scene, sdf_sample_seed)
        self.cam_dir = os.path.join(root, 'scenes', f'scene_{scene:04d}', camera)
        self.camera_poses = np.load(os.path.join(self.cam_dir, 'camera_poses.npy'))
        self.align = np.load(os.path.join(self.cam_dir, 'cam0_wrt_table.npy'))

    def frame(self, dump_dir: str, frame: int) -> tuple:
        """(grasps, models, sdfs, poses, table) of one frame."""
        grasps = load_dump(dump_path(dump_dir, self.scene, self.camera, frame))
        annotation = read_annotation(os.path.join(self.cam_dir, 'annotations',
                                                  f'{frame:04d}.xml'))
        poses = [p for _, p in annotation]
        if len(poses) != len(self.models):
            raise ValueError(f'annotation {frame:04d}.xml lists {len(poses)} objects, '
                             f'frame 0000 lists {len(self.models)}')
        table = PosedTable(np.linalg.inv(np.matmul(self.align, self.camera_poses[frame])))
        return grasps, self.models, self.sdfs, poses, table


def evaluate_scene(root: str, dump_dir: str, camera: str, scene: int, frames: Sequence[int],
                   sdf_sample_seed: Optional[int] = None,
                   on_frame: Optional[Callable[[int, int], None]] = None,
                   protocol: Protocol = STANDARD,
                   on_result: Optional[Callable[[int, int, dict], None]] = None,
                   missing_dumps: str = 'error') -> np.ndarray:
    """(len(frames), protocol.top_k, 6) accuracy of one scene, graspnetAPI's ``eval_scene``
    step for step, :data:`FRAME_BATCH` frames at a time (:func:`evaluate_frames`: each frame's
    selection and collision test, ``on_frame`` before each, then one force-closure pass for
    the batch, timed with its last frame). ``on_result(scene, frame, result)`` sees each
    frame's whole :func:`evaluate_frame` result (the diagnostics read it). A frame without a
    dump file is an error (graspnetAPI's), or scores 0 with ``missing_dumps='zero'``
    (:data:`~.coverage.MISSING_DUMPS`).

    Raises EvaluationError naming the scene and frame when one fails.
    """
    where = {'frame': frames[0] if len(frames) else 0}

    def started(scene_, frame):
        where['frame'] = frame
        if on_frame is not None:
            on_frame(scene_, frame)
    try:
        inputs = SceneInputs(root, camera, scene, sdf_sample_seed)
        out = np.zeros((len(frames), protocol.top_k, 6))
        for lo in range(0, len(frames), FRAME_BATCH):
            rows, args = [], []
            for n in range(lo, min(lo + FRAME_BATCH, len(frames))):
                where['frame'] = frames[n]
                if missing_dumps == 'zero' and \
                        not os.path.isfile(dump_path(dump_dir, scene, camera, frames[n])):
                    started(scene, frames[n])  # its accuracy stays 0
                    continue
                rows.append(n)
                args.append(inputs.frame(dump_dir, frames[n]))
            results = evaluate_frames(args, on_frame=lambda k: started(scene, frames[rows[k]]),
                                      **protocol.frame_options())
            for n, result in zip(rows, results):
                out[n] = result['accuracy']
                if on_result is not None:
                    on_result(scene, frames[n], result)
        return out
    except EvaluationError:
        raise
    except Exception as err:  # noqa: BLE001 - re-raised with the scene and frame named
        raise EvaluationError(f'scene {scene} frame {where["frame"]}: {type(err).__name__}: '
                              f'{err}') from err


# many scenes --------------------------------------------------------------------------------
def _fingerprint(dump_dir: str, camera: str, scene: int, frames: Sequence[int],
                 sdf_sample_seed, protocol: Protocol = STANDARD,
                 missing_dumps: str = 'error') -> str:
    h = hashlib.sha1(f'{EVALUATOR_VERSION}|{camera}|{sdf_sample_seed}|{protocol.key()}|'
                     f'{missing_dumps}'.encode())
    for f in frames:
        p = dump_path(dump_dir, scene, camera, f)
        st = os.stat(p) if os.path.exists(p) else None
        h.update(f'{f}:{st.st_size if st else -1}:{st.st_mtime_ns if st else -1};'.encode())
    return h.hexdigest()


def _result_path(results_dir: str, scene: int, protocol: Protocol = STANDARD) -> str:
    tail = '' if protocol == STANDARD else f'_{protocol.name}'
    return os.path.join(results_dir, f'scene_{scene:04d}{tail}.npz')


def _load_result(path: str, key: str, frames: Sequence[int]) -> Optional[np.ndarray]:
    try:
        with np.load(path) as z:
            if str(z['fingerprint']) == key and z['frames'].tolist() == list(frames):
                return z['accuracy']
    except (OSError, KeyError, ValueError):
        return None
    return None


def _save_result(path: str, key: str, frames: Sequence[int], accuracy: np.ndarray) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}.npz'
    np.savez(tmp, accuracy=accuracy, frames=np.asarray(frames), fingerprint=np.array(key))
    os.replace(tmp, path)


_PROGRESS = None


def _init_worker(progress_queue, models_folder: str) -> None:
    global _PROGRESS
    _PROGRESS = progress_queue
    share_parsed_models(models_folder)


def work_units(frames: Dict[int, List[int]], nproc: int) -> List[Tuple[int, List[int]]]:
    """Split the scenes' frames into the ``(scene, frames)`` pieces the processes take from a
    queue.

    With many scenes (at least 4 per process) a unit is a scene: the queue balances the load
    and a scene's result is saved by the process that evaluated it. With fewer, the frames are
    cut into contiguous pieces that shrink as the work left does (each ``1 / (2 * nproc)`` of
    the frames left, never across a scene): frames differ in cost (how many grasps reach the
    force-closure test), and with large pieces at the start and single frames at the end no
    process waits long for another; 3 scenes on 2 processes would otherwise finish in 2/3, not
    1/2, of the serial time. The models are parsed once for all processes (scene_models), so
    a scene that several processes share costs no extra parse.
    """
    scenes = [s for s in frames if frames[s]]
    if len(scenes) >= 4 * nproc:
        return [(s, list(frames[s])) for s in scenes]
    left = sum(len(frames[s]) for s in scenes)
    units = []
    for s in scenes:
        todo = list(frames[s])
        while todo:
            size = max(1, left // (2 * nproc))
            piece, todo = todo[:size], todo[size:]
            units.append((s, piece))
            left -= len(piece)
    return units


def _available_cores() -> int:
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_nproc(frames: int) -> int:
    """Processes for ``nproc=None``: one per core this process may run on, but at most one per
    :data:`FRAME_BATCH` frames (a process with less work costs more to start than it saves)."""
    return max(1, min(_available_cores(), frames // FRAME_BATCH))


def _worker(root, dump_dir, camera, scene, frames, sdf_sample_seed, whole_scene_file, protocol,
            missing_dumps):
    """Evaluate one piece; a piece that is a whole scene is saved at once (resume)."""
    def report(s, f):
        _PROGRESS.put((os.getpid(), s, f, time.monotonic()))
    acc = evaluate_scene(root, dump_dir, camera, scene, frames, sdf_sample_seed, report,
                         protocol, missing_dumps=missing_dumps)
    if whole_scene_file is not None:
        _save_result(*whole_scene_file, frames, acc)
    _PROGRESS.put((os.getpid(), None, None, time.monotonic()))
    return acc


class _Bar:
    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled and total:
            from mmengine.utils import ProgressBar
            self.bar = ProgressBar(total)

    def step(self, n: int = 1) -> None:
        if self.bar is not None:
            for _ in range(n):
                self.bar.update()


class _FrameTimer:
    """``frame_timeout`` in the calling process: SIGALRM interrupts a frame that runs past it
    (:class:`FrameTimeout`). Needs the main thread of a POSIX process (``usable``)."""

    def __init__(self, timeout: Optional[float]):
        self.timeout = timeout
        self.usable = (hasattr(signal, 'setitimer')
                       and threading.current_thread() is threading.main_thread())
        self.where = None

    def _expired(self, *_):
        s, f = self.where
        raise FrameTimeout(f'scene {s} frame {f}: no result after {self.timeout:.0f} s '
                           '(frame_timeout)')

    def __enter__(self):
        if self.timeout is not None:
            self._previous = signal.signal(signal.SIGALRM, self._expired)
        return self

    def start(self, scene: int, frame: int) -> None:
        if self.timeout is not None:
            self.where = (scene, frame)
            signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def stop(self) -> None:
        if self.timeout is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(self, *exc):
        if self.timeout is not None:
            self.stop()
            signal.signal(signal.SIGALRM, self._previous)


def evaluate_dump(root: str, dump_dir: str, camera: str, scenes: Iterable[int],
                  frames: Optional[Dict[int, Sequence[int]]] = None,
                  nproc: Optional[int] = 1,
                  results_dir: Optional[str] = None, frame_timeout: Optional[float] = 600.0,
                  progress: bool = True, sdf_sample_seed: Optional[int] = None,
                  protocol: Protocol = STANDARD, missing_dumps: str = 'error'
                  ) -> Dict[int, np.ndarray]:
    """Evaluate every scene of ``scenes`` (frames: per scene, default every annotated frame;
    a frame without a dump: see :func:`evaluate_scene`'s ``missing_dumps``).

    ``nproc > 1`` runs :func:`work_units` in that many processes (None: :func:`auto_nproc`
    of the frames to evaluate, every core on a test split); a process that raises, dies
    or spends more than ``frame_timeout`` seconds on one frame ends the run with
    EvaluationError naming the scene and frame (nothing waits forever). With one process the
    frames run here under a SIGALRM timer (in a single worker process off the main thread);
    ``frame_timeout=None`` sets no limit. Finished scenes are kept in ``results_dir``.
    Returns {scene: (frames, protocol.top_k, 6) accuracy}.
    """
    if frame_timeout is not None and not (frame_timeout > 0 and math.isfinite(frame_timeout)):
        raise ValueError(f'frame_timeout={frame_timeout}: expected seconds > 0 or None')
    scenes = [int(s) for s in scenes]
    frames = {s: list(frames[s]) if frames and s in frames else scene_frames(root, camera, s)
              for s in scenes}
    out: Dict[int, np.ndarray] = {}
    keys = {}
    for s in scenes:
        keys[s] = _fingerprint(dump_dir, camera, s, frames[s], sdf_sample_seed, protocol,
                               missing_dumps)
        cached = None if results_dir is None else \
            _load_result(_result_path(results_dir, s, protocol), keys[s], frames[s])
        if cached is not None:
            out[s] = cached
    todo = {s: frames[s] for s in scenes if s not in out}

    def save(s, acc):
        if results_dir is not None:
            _save_result(_result_path(results_dir, s, protocol), keys[s], frames[s], acc)

    if nproc is None:
        nproc = auto_nproc(sum(map(len, todo.values())))
    bar = _Bar(sum(map(len, todo.values())), progress)
    timer = _FrameTimer(frame_timeout)
    if (nproc <= 1 or sum(map(len, todo.values())) <= 1) and timer.usable:
        def started(s, f):
            bar.step()
            timer.start(s, f)
        with timer:
            for s in todo:
                out[s] = evaluate_scene(root, dump_dir, camera, s, frames[s], sdf_sample_seed,
                                        started, protocol, missing_dumps=missing_dumps)
                timer.stop()
                save(s, out[s])
        return {s: out[s] for s in scenes}
    for s in [s for s in todo if not todo[s]]:
        out[s] = np.zeros((0, protocol.top_k, 6))
        save(s, out[s])
    units = work_units(todo, max(1, nproc))
    if frame_timeout is None:
        frame_timeout = math.inf
    whole = {s: (_result_path(results_dir, s, protocol), keys[s]) for s, f in units
             if results_dir is not None and len(f) == len(frames[s])}
    parts: Dict[int, Dict[int, np.ndarray]] = {s: {} for s in todo}
    ctx = mp.get_context('fork' if 'fork' in mp.get_all_start_methods() else 'spawn')
    progress_queue = ctx.Queue()
    models_folder = tempfile.TemporaryDirectory(prefix='mmgrasp-models-')
    pool = cf.ProcessPoolExecutor(min(max(1, nproc), len(units)), mp_context=ctx,
                                  initializer=_init_worker,
                                  initargs=(progress_queue, models_folder.name))
    try:
        _read_models_once(pool, root, camera, list(todo), frame_timeout)
        futures = {pool.submit(_worker, root, dump_dir, camera, s, f, sdf_sample_seed,
                               whole.get(s), protocol, missing_dumps): (s, f) for s, f in units}
        current: Dict[int, tuple] = {}  # pid -> (scene, frame, started)
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            while True:
                try:
                    pid, s, f, t = progress_queue.get_nowait()
                except queue_mod.Empty:
                    break
                if f is None:
                    current.pop(pid, None)
                else:
                    if pid in current:
                        bar.step()
                    current[pid] = (s, f, t)
            for fut in done:
                s, fs = futures[fut]
                try:
                    acc = fut.result()
                except cf.process.BrokenProcessPool:
                    where = [f'scene {c[0]} frame {c[1]}' for c in current.values()] or \
                        [f'scene {s}']
                    raise EvaluationError(f'an evaluation process died while on '
                                          f'{", ".join(where)}') from None
                parts[s].update(zip(fs, acc))
                if len(parts[s]) == len(frames[s]):
                    out[s] = np.stack([parts[s][f] for f in frames[s]])
                    if s not in whole:
                        save(s, out[s])
                bar.step()
            now = time.monotonic()
            for s, f, t in current.values():
                if now - t > frame_timeout:
                    raise EvaluationError(f'scene {s} frame {f}: no result after '
                                          f'{frame_timeout:.0f} s (frame_timeout)')
    finally:
        for proc in list(getattr(pool, '_processes', {}).values()):
            if proc.is_alive():
                proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        progress_queue.close()
        models_folder.cleanup()
    return {s: out[s] for s in scenes}


def _read_models_once(pool: cf.ProcessPoolExecutor, root: str, camera: str,
                      scenes: List[int], timeout: float) -> None:
    """Parse every object model the scenes use, one object a task, before any frame: each
    text file is parsed by one process and shared with the others (scene_models)."""
    users: Dict[str, List[int]] = {}
    for s in scenes:
        try:
            dirs = model_dirs(root, camera, s)
        except Exception as err:  # noqa: BLE001 - re-raised naming the scene
            raise EvaluationError(f'scene {s} frame 0: {type(err).__name__}: {err}') from err
        for d in dirs:
            users.setdefault(d, []).append(s)
    reads = {pool.submit(read_model, d): d for d in users}
    done, pending = cf.wait(reads, timeout=None if math.isinf(timeout) else timeout)
    if pending:
        raise EvaluationError(f'reading the models of scenes {scenes}: no result after '
                              f'{timeout:.0f} s (frame_timeout)')
    for fut in done:
        try:
            fut.result()
        except Exception as err:  # noqa: BLE001 - re-raised naming the model and its scenes
            d = reads[fut]
            raise EvaluationError(f'model {d} (scene {", ".join(map(str, users[d]))}): '
                                  f'{type(err).__name__}: {err}') from err


# summary ------------------------------------------------------------------------------------
def summarize(accuracy: Dict[int, np.ndarray]) -> Dict[str, float]:
    """AP, AP0.8, AP0.4 (percent) over all scenes and per split present; frame counts."""
    def figures(arrays):
        a = np.concatenate(arrays, axis=0)
        return {'AP': 100.0 * float(a.mean()), 'AP0.8': 100.0 * float(a[:, :, 3].mean()),
                'AP0.4': 100.0 * float(a[:, :, 1].mean()), 'frames': int(len(a))}
    out: Dict[str, float] = {}
    if not accuracy:
        return out
    for name, value in figures(list(accuracy.values())).items():
        out[name] = value
    for split, ids in SPLITS.items():
        arrays = [accuracy[s] for s in sorted(accuracy) if s in ids]
        if arrays:
            for name, value in figures(arrays).items():
                out[f'{split}/{name}'] = value
    return out


def evaluate_sizes(root: str, dump_dir: str, camera: str, scenes: Iterable[int],
                   frames: Optional[Dict[int, Sequence[int]]] = None,
                   gripper: Gripper = GRASPNET_GRIPPER, **options) -> Dict[str, float]:
    """Scale-Balanced-Grasp's AP by grasp width (``evaluate_scale.py``): the dump evaluated
    once per :data:`SIZE_PROTOCOLS` (each a whole evaluation of the width-filtered dump, with
    ``gripper``) with :func:`evaluate_dump` (``options``: its keywords). Returns
    ``small/AP``, ``small/seen/AP``, ... as :func:`summarize` names them."""
    out: Dict[str, float] = {}
    for protocol in SIZE_PROTOCOLS:
        if not gripper.same_as(GRASPNET_GRIPPER):
            protocol = protocol.with_gripper(gripper)
        accuracy = evaluate_dump(root, dump_dir, camera, scenes, frames, protocol=protocol,
                                 **options)
        out.update({f'{protocol.name}/{k}': v for k, v in summarize(accuracy).items()})
    return out


def write_json(path: str, payload: dict) -> None:
    """JSON through a temporary name."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump(payload, f, indent=2, sort_keys=True)
    os.replace(tmp, path)
