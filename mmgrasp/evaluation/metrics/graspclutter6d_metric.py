"""GraspClutter6DMetric: GraspClutter6D AP (graspclutter6dAPI 0.0.3's protocol) inside mmengine's
test loop."""
import os
from typing import Dict, List, Optional, Sequence

from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from mmgrasp.datasets.graspclutter6d_reader import GraspClutter6DReader, image_id
from mmgrasp.registry import METRICS
from .. import graspclutter6d_dump_eval as gc6d
from ..coverage import MISSING_DUMPS, missing_dumps
from ..empty_frames import frame_counts, model_empty_frames
from ..graspnet_dump_eval import write_json
from .grasp_dump import save_grasps


def write_gc6d_dump(dump_dir: str, sample: dict) -> int:
    """Write one sample's ``pred_grasps`` to ``%06d/<camera>/%06d.npy`` (scene, image id);
    returns the number of grasps."""
    return save_grasps(gc6d.dump_path(dump_dir, int(sample['scene']), sample['camera'],
                                      image_id(int(sample['frame']), sample['camera'])), sample)


@METRICS.register_module()
class GraspClutter6DMetric(BaseMetric):
    """Dump each frame's grasps in GraspClutter6D's layout, then evaluate the scenes of the
    dumped frames with graspclutter6dAPI's ``eval_scene`` rules (see
    :mod:`mmgrasp.evaluation.graspclutter6d_dump_eval`): AP, AP0.4 and AP0.8 in percent over the
    frames run. When those are all 13 annotations of every test scene
    (``grasp_test_scene_ids.json``) these are the benchmark's figures for the camera; otherwise
    the JSON's ``coverage`` labels them "sampled: N of M frames" (``test_split`` false) and
    the frames not run are left out rather than scored zero.

    ``missing_dumps`` set scores graspclutter6dAPI's ``eval_all`` way instead: every
    annotation of every test scene (and of any other scene run) is evaluated from the dump
    folder, and a frame without a dump file is an error naming it ('error') or scores 0
    ('zero', the API's rule; the JSON's ``missing_dumps`` and a warning say how many).

    Figures go to ``<dump_dir>/graspclutter6d_<camera>.json``. Frames (annotations) whose
    dump holds no grasp are counted (``empty_frames``) and warned about with the likely cause
    (:func:`mmgrasp.evaluation.empty_frames.model_empty_frames`).

    Args:
        data_root: the GraspClutter6D root (models_m/, models_obj_m/, scenes/).
        camera: one of the four cameras or an alias; must be the dataset's.
        dump_dir: where the grasps are dumped and read back.
        nproc: evaluation processes (scenes in parallel).
        settings: test-time settings reported with the figures (``tools/test.py`` fills it).
        sdf_sample_seed: reproduce dex-net's random out-of-grid surface sample per scene (one
            draw per distinct model, as the API's freshly cached models draw it).
        missing_dumps: None (default): the frames run only; 'error' or 'zero': the whole
            protocol, as above.
    """

    default_prefix = 'gc6d'
    #: what the protocol fixes, reported beside the figures
    protocol = {'evaluator': gc6d.EVALUATOR_VERSION, 'max width': f'{gc6d.MAX_WIDTH} m',
                'background filter': f'{gc6d.BACKGROUND_DISTANCE} m from 8 mm voxel-sampled '
                                     'model points', 'table in collision check': 'none',
                'grasps per instance': 'top 10 (top 50 a frame)',
                'annotations': '13 a scene and camera'}

    def __init__(self, data_root: str, camera: str = 'realsense', dump_dir: str = 'work_dirs/dump',
                 nproc: int = 1, settings: Optional[dict] = None,
                 sdf_sample_seed: Optional[int] = None, missing_dumps: Optional[str] = None,
                 collect_device: str = 'cpu', prefix: Optional[str] = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        if missing_dumps is not None and missing_dumps not in MISSING_DUMPS:
            raise ValueError(f'GraspClutter6DMetric: missing_dumps={missing_dumps!r}: expected '
                             f'None (the frames run) or one of {MISSING_DUMPS}')
        self.missing_dumps = missing_dumps
        self.data_root = data_root
        self.camera = GraspClutter6DReader(data_root, camera).camera
        self.dump_dir = dump_dir
        self.nproc = nproc
        self.settings = dict(settings or {})
        self.sdf_sample_seed = sdf_sample_seed

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if sample['camera'] != self.camera:
                raise ValueError(f'GraspClutter6DMetric(camera={self.camera!r}) got a frame of '
                                 f'camera {sample["camera"]!r}: set the metric to the dataset '
                                 f'camera')
            counts = frame_counts(sample, write_gc6d_dump(self.dump_dir, sample))
            self.results.append((int(sample['scene']), int(sample['frame']), *counts))

    def compute_metrics(self, results: List[tuple]) -> Dict[str, float]:
        run: Dict[int, List[int]] = {}
        for scene, frame, *_ in results:
            run.setdefault(scene, []).append(frame)
        run = {s: sorted(set(f)) for s, f in sorted(run.items())}
        test_split = GraspClutter6DReader(self.data_root, self.camera).scene_ids('test')
        missing = None
        if self.missing_dumps is not None:  # eval_all: every annotation, from the folder
            every = list(range(gc6d.NUM_ANNOTATIONS))
            run = {s: every for s in sorted(set(test_split) | set(run))}
            missing = missing_dumps(
                run, lambda s, f: gc6d.dump_path(self.dump_dir, s, self.camera,
                                                 image_id(f, self.camera)),
                self.missing_dumps, f"GraspClutter6D's %06d/{self.camera}/%06d.npy")
        scenes = list(run)
        # without missing_dumps, the frames run only: a frame not run (a sample, or a dump left
        # in the folder by another run) would score zeros, or another run's grasps, as if run
        accuracy = gc6d.evaluate_dump(self.data_root, self.dump_dir, self.camera, scenes,
                                      self.nproc, self.sdf_sample_seed, frames=run,
                                      missing_dumps=self.missing_dumps or 'error')
        covered = gc6d.coverage(run, test_split)
        figures = gc6d.summarize(accuracy)
        empty_record = model_empty_frames({(s, f): tuple(c) for s, f, *c in results},
                                          'GraspClutter6DMetric', self.settings)
        figures['empty_frames'] = empty_record['count']
        payload = dict(figures=figures, scenes=scenes, camera=self.camera,
                       test_split=covered['complete'], coverage=covered, protocol=self.protocol,
                       settings=self.settings, empty_frames=empty_record,
                       missing_dumps=missing, dump_dir=os.path.abspath(self.dump_dir))
        logger = MMLogger.get_current_instance()
        if missing is not None:
            logger.warning(f'GraspClutter6DMetric: {missing["label"]}')
        path = os.path.join(self.dump_dir, f'graspclutter6d_{self.camera}.json')
        write_json(path, payload)
        logger.info(f'GraspClutter6D evaluation written to {path}')
        return dict(figures)
