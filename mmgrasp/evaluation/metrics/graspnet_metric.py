"""GraspNetMetric: GraspNet-1Billion AP (graspnetAPI's protocol) inside mmengine's test loop."""
import os
import warnings
from typing import Dict, List, Optional, Sequence, Union

from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from mmgrasp.geometry.gripper import GRASPNET_GRIPPER, GripperLike, build_gripper
from mmgrasp.registry import METRICS
from ..coverage import check_coverage, coverage, split_names
from ..empty_frames import dump_rows, empty_frame_figures, frame_counts, model_empty_frames
from ..graspnet_dump_eval import (EVALUATOR_VERSION, STANDARD, dump_path, evaluate_dump,
                                  evaluate_sizes,
                                  summarize, write_json)
from .grasp_dump import write_frame_dump


@METRICS.register_module()
class GraspNetMetric(BaseMetric):
    """Dump each frame's grasps (as :class:`GraspDumpMetric`), then evaluate the dumped frames
    with graspnetAPI's rules: AP, AP0.8 and AP0.4 in percent, over all frames and per split
    (seen 100-129, similar 130-159, novel 160-189) present.

    Per-scene results are kept in ``<dump_dir>/eval_<camera>/`` (a rerun resumes) and the
    figures go to ``<dump_dir>/graspnet_<camera>.json``.

    Frames that are not the whole split (scenes missing on disk, ``frames`` / ``frame_stride``
    of the dataset) are evaluated and labelled "sampled: N of M frames, not comparable with
    published AP" (:mod:`mmgrasp.evaluation.coverage`): in the JSON (``coverage``), in the
    returned metrics (``sampled``, a string) and by a warning; ``require_complete`` makes that
    an error before any frame is evaluated.

    Frames whose dump holds no grasp (they score 0) are counted (``empty_frames`` and
    ``<split>/empty_frames`` beside ``frames``; the JSON's ``empty_frames`` names them) and
    warned about with the likely cause: whether the model decoded no grasp (its objectness
    filter kept no seed) or the collision filter removed all it decoded (the sample's
    ``grasps_before_collision``, which ``GraspDetector.filter_collisions`` sets). Results given
    as ``(scene, frame)`` alone (frames dumped before) are counted from their dump files.

    Args:
        data_root: dataset root holding ``scenes/`` and ``models/``.
        camera: 'realsense' or 'kinect'.
        dump_dir: where the grasps are dumped and read back.
        nproc: evaluation processes (frames and scenes split between them); None: one per
            core, at most one per 16 frames (:func:`~..graspnet_dump_eval.auto_nproc`).
        frame_timeout: seconds one frame may take before the evaluation stops with an error.
        settings: test-time settings reported with the figures (camera, collision threshold,
            objectness filter ...); ``tools/test.py`` fills it from the config.
        sdf_sample_seed: reproduce dexnet's random out-of-grid surface sample (see
            :func:`mmgrasp.evaluation.scene_models.scene_assets`).
        scale_ap: also Scale-Balanced-Grasp's AP by grasp width (``small/AP`` ...; three more
            evaluations of the width-filtered dump).
        split: the split the frames should cover ('test', 'test_seen', 'seen', ...; None: the
            test splits the evaluated scenes belong to); ``tools/test.py`` passes the dataset's.
        require_complete: raise instead of warning when the frames do not cover the split.
        gripper: the gripper the grasps are checked with (fingers and palm against the scene,
            widths clipped to its maximum): a :class:`mmgrasp.geometry.Gripper` or a dict of
            its fields; None is GraspNet's. It must be the model's and the labels' gripper.
    """

    default_prefix = 'graspnet'

    def __init__(self, data_root: str, camera: str = 'realsense', dump_dir: str = 'work_dirs/dump',
                 nproc: Optional[int] = None, frame_timeout: float = 600.0, progress: bool = True,
                 settings: Optional[dict] = None, sdf_sample_seed: Optional[int] = None,
                 scale_ap: bool = False, split: Optional[str] = None,
                 require_complete: bool = False, gripper: GripperLike = None,
                 collect_device: str = 'cpu', prefix: Optional[str] = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.data_root = data_root
        self.camera = camera
        self.dump_dir = dump_dir
        self.nproc = nproc
        self.frame_timeout = frame_timeout
        self.progress = progress
        self.settings = dict(settings or {})
        self.sdf_sample_seed = sdf_sample_seed
        self.scale_ap = bool(scale_ap)
        split_names(split)  # a wrong name fails here, not after the inference
        self.split = split
        self.require_complete = bool(require_complete)
        self.gripper = build_gripper(gripper)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if sample['camera'] != self.camera:
                raise ValueError(f'GraspNetMetric(camera={self.camera!r}) got a frame of camera '
                                 f'{sample["camera"]!r}: set the metric to the dataset camera')
            counts = frame_counts(sample, write_frame_dump(self.dump_dir, sample))
            self.results.append((int(sample['scene']), int(sample['frame']), *counts))

    def compute_metrics(self, results: List[tuple]) -> Dict[str, Union[float, str]]:
        frames: Dict[int, List[int]] = {}
        for scene, frame in sorted({r[:2] for r in results}):
            frames.setdefault(scene, []).append(frame)
        cov = coverage(frames, self.split)
        logger = MMLogger.get_current_instance()
        message = check_coverage(cov, self.require_complete, 'GraspNetMetric')
        if message:
            logger.warning(message)
            warnings.warn(message, stacklevel=2)
        options = dict(nproc=self.nproc,
                       results_dir=os.path.join(self.dump_dir, f'eval_{self.camera}'),
                       frame_timeout=self.frame_timeout, progress=self.progress,
                       sdf_sample_seed=self.sdf_sample_seed)
        protocol = STANDARD if self.gripper.same_as(GRASPNET_GRIPPER) else \
            STANDARD.with_gripper(self.gripper)
        accuracy = evaluate_dump(self.data_root, self.dump_dir, self.camera, sorted(frames),
                                 frames, protocol=protocol, **options)
        figures = summarize(accuracy)
        counts = {(s, f): tuple(c) if c else  # a frame dumped before: its file's rows
                  (dump_rows(dump_path(self.dump_dir, s, self.camera, f)), None)
                  for s, f, *c in results}
        empty_record = model_empty_frames(counts, 'GraspNetMetric', self.settings)
        figures.update(empty_frame_figures(empty_record['frame_ids'], frames))
        if self.scale_ap:
            figures.update(evaluate_sizes(self.data_root, self.dump_dir, self.camera,
                                          sorted(frames), frames, gripper=self.gripper,
                                          **options))
        payload = dict(figures=figures, scenes=sorted(frames), camera=self.camera,
                       evaluator=EVALUATOR_VERSION, settings=self.settings, coverage=cov,
                       empty_frames=empty_record, dump_dir=os.path.abspath(self.dump_dir))
        if protocol is not STANDARD:
            payload['gripper'] = self.gripper.to_dict()
        path = os.path.join(self.dump_dir, f'graspnet_{self.camera}.json')
        write_json(path, payload)
        logger.info(f'GraspNet evaluation written to {path}')
        out: Dict[str, Union[float, str]] = dict(figures)
        if not cov['complete']:
            out['sampled'] = f'{cov["label"]} ({cov["details"]})'
        return out
