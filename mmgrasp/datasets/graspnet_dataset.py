"""GraspNet-1Billion frames as an mmengine dataset with per-sample random streams."""
import inspect
import operator
from typing import Callable, List, Optional, Sequence, Tuple, Union

from mmengine.dataset import BaseDataset

from mmgrasp.registry import DATASETS, TRANSFORMS
from mmgrasp.utils.random import frame_rng, sample_rng
from .layouts import open_reader


@DATASETS.register_module()
class GraspNetDataset(BaseDataset):
    """One sample per (scene, frame) of one camera.

    ``dataset[index]`` or ``dataset[(epoch, index)]`` (what :class:`EpochAwareSampler` yields)
    runs the pipeline on a results dict holding the frame's ``scene``, ``frame``, ``camera``,
    ``sample_idx``, plus ``epoch``, ``rng``, ``reader`` and ``data_root``. Every random draw of
    the pipeline comes from that ``rng``: ``sample_rng(seed, epoch, sample_idx)`` in training, so
    a sample depends on (seed, epoch, index) only; ``frame_rng(seed, scene, camera, frame)`` with
    ``test_mode``, so a frame's prediction does not depend on which other frames are in the run
    (a stride, a frame list, a launcher's shard) and ``GraspInferencer`` reproduces it.

    A failing sample is never replaced by a random other one (mmengine's ``max_refetch``): a
    transform returning None raises, and an exception raised inside a transform propagates with a
    note naming the transform, scene and frame.

    Args:
        data_root: the GraspNet-1Billion root (``scenes/``, ``grasp_label/``, ...).
        split: ``'train'``, ``'test'``, ``'test_seen'``, ``'test_similar'`` or ``'test_novel'``.
        camera: ``'realsense'`` or ``'kinect'``.
        scenes: None for every scene of the split on disk, n for the first n of them, or a list
            of scene ids (each must be of the split and on disk).
        frames: the first ``frames`` frames of each scene (None: all), or a list of frame ids
            (each must exist in every scene).
        frame_stride: of those, every ``frame_stride``-th (a sampled evaluation; the metric
            labels such a run, see :mod:`mmgrasp.evaluation.coverage`).
        seed: seed of the per-sample random streams.
        pipeline: transforms (configs or callables).
        test_mode: draw per frame, not per sample (the test configs set it; tools/test.py
            too). Also passed to BaseDataset.
        tolerance_dir, graspness_dir: see :class:`GraspNetReader`.
        layout: ``'graspnet'`` or ``'graspclutter6d'`` (:mod:`.layouts`); None detects it from
            the root. GraspClutter6D: splits ``'train'``, ``'test'``, ``'all'``; cameras
            ``'realsense-d415'``, ``'realsense-d435'``, ``'azure-kinect'``, ``'zivid'`` (or the
            aliases ``'realsense'``, ``'kinect'``); frames are the camera's 13 annotations.
        **kwargs: further BaseDataset arguments (``serialize_data``, ``indices``, ``lazy_init``,
            ``metainfo``).
    """

    METAINFO: dict = dict(dataset_name='GraspNet-1Billion')  # or GraspClutter6D, see layout

    def __init__(self, data_root: str, split: str = 'train', camera: str = 'realsense',
                 scenes: Union[int, Sequence[int], None] = None,
                 frames: Union[int, Sequence[int], None] = None, frame_stride: int = 1,
                 seed: int = 0, pipeline: Sequence[Union[dict, Callable]] = (),
                 test_mode: bool = False, tolerance_dir: Optional[str] = None,
                 graspness_dir: Optional[str] = None, layout: Optional[str] = None, **kwargs):
        if 'max_refetch' in kwargs:
            raise ValueError('GraspNetDataset never refetches another sample: drop max_refetch')
        if isinstance(frames, int) and frames < 1:
            raise ValueError(f'frames must be >= 1, a list of frame ids or None, got {frames}')
        if operator.index(frame_stride) < 1:
            raise ValueError(f'frame_stride must be >= 1, got {frame_stride}')
        self.reader = open_reader(data_root, camera, layout, tolerance_dir, graspness_dir)
        self.split = split
        self.camera = self.reader.camera  # GraspClutter6D resolves 'realsense'/'kinect' aliases
        self.scenes = scenes if scenes is None or isinstance(scenes, int) else list(scenes)
        self.frames = frames if frames is None or isinstance(frames, int) else \
            sorted(set(operator.index(f) for f in frames))
        self.frame_stride = frame_stride
        self.seed = operator.index(seed)
        # Built in mmgrasp's scope whatever the current default scope is (a Runner of another
        # scope, a test): bare names resolve to mmgrasp's transforms, then mmcv's.
        pipeline = [TRANSFORMS.build({'_scope_': 'mmgrasp', **t}) if isinstance(t, dict) else t
                    for t in pipeline]
        super().__init__(data_root=data_root, pipeline=pipeline, test_mode=test_mode,
                         max_refetch=0, **kwargs)
        self._metainfo.setdefault('split', split)
        self._metainfo.setdefault('camera', self.camera)
        if self.reader.layout == 'graspclutter6d':
            self._metainfo['dataset_name'] = 'GraspClutter6D'
        for transform in self.pipeline.transforms:
            prepare = getattr(transform, 'prepare', None)
            if prepare is None:
                continue
            # stores are built here, in the main process, before loader workers fork; a
            # transform whose store depends on the reader's folders is handed the reader itself
            if 'reader' in inspect.signature(prepare).parameters:
                prepare(self.data_root, self.camera, reader=self.reader)
            else:
                prepare(self.data_root, self.camera)

    def _scene_ids(self) -> List[int]:
        present = self.reader.scene_ids(self.split)
        if self.scenes is None:
            return present
        if isinstance(self.scenes, int):
            if not 1 <= self.scenes <= len(present):
                raise ValueError(f'scenes={self.scenes}: split {self.split!r} has {len(present)} '
                                 f'scenes with a {self.camera}/ folder under {self.reader.root}')
            return present[:self.scenes]
        missing = [s for s in self.scenes if s not in present]
        if missing:
            raise ValueError(f'scenes {missing} are not scenes of split {self.split!r} present '
                             f'under {self.reader.root} for {self.camera} (present: {present})')
        return [int(s) for s in self.scenes]

    def load_data_list(self) -> List[dict]:
        data_list = []
        for scene in self._scene_ids():
            count = self.reader.num_frames(scene)
            if isinstance(self.frames, list):
                missing = [f for f in self.frames if not 0 <= f < count]
                if missing:
                    raise ValueError(f'frames {missing}: scene {scene} has {count} frames')
                chosen = self.frames
            else:
                chosen = range(count if self.frames is None else min(count, self.frames))
            for frame in chosen[::self.frame_stride]:
                data_list.append(dict(scene=scene, frame=frame, camera=self.camera,
                                      sample_idx=len(data_list)))
        return data_list

    def __getitem__(self, idx: Union[int, Tuple[int, int]]) -> dict:
        epoch, index = idx if isinstance(idx, tuple) else (0, idx)
        epoch, index = operator.index(epoch), operator.index(index)
        if not self._fully_initialized:
            self.full_init()
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f'sample index {index} out of range for {size} samples')
        index %= size
        results = self.get_data_info(index)
        rng = (frame_rng(self.seed, results['scene'], results['camera'], results['frame'])
               if self.test_mode else sample_rng(self.seed, epoch, index))
        results.update(epoch=epoch, rng=rng, reader=self.reader, data_root=self.data_root)
        return self._run_pipeline(results)

    def _run_pipeline(self, results: dict) -> dict:
        where = (f'scene {results["scene"]} frame {results["frame"]} ({results["camera"]}, '
                 f'sample {results["sample_idx"]}, epoch {results["epoch"]})')
        for transform in self.pipeline.transforms:
            name = getattr(transform, '__name__', type(transform).__name__)
            try:
                out = transform(results)
            except Exception as exc:
                exc.add_note(f'GraspNetDataset: raised by {name} on {where}')
                raise
            if out is None:
                raise RuntimeError(f'GraspNetDataset: {name} returned None on {where}; a failing '
                                   f'sample is not replaced by another')
            results = out
        return results
