"""GraspInferencer: a trained detector on depth images, as mmdet's DetInferencer is on images."""
import copy
import os
import warnings
from typing import List, Optional, Sequence, Union

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.runner.checkpoint import _load_checkpoint, _load_checkpoint_to_model

from mmgrasp.datasets.transforms.depth_image import implausible_depth
from mmgrasp.datasets.transforms.hggd import REFERENCE_INTRINSICS
from mmgrasp.evaluation.functional import grasp_nms
from mmgrasp.registry import MODELS, TRANSFORMS, build_in_scope
from mmgrasp.storage.frames.store import workspace_image
from mmgrasp.utils.checkpoint_keys import check_checkpoint
from mmgrasp.utils.random import frame_rng, image_rng

from .cli import config_num_threads, pinned_threads
from .config_check import check_config
from .setup_env import register_all_modules

DepthInput = Union[np.ndarray, str]


def _depth_fix(image: np.ndarray) -> str:
    """How to turn ``image`` (not uint16) into raw uint16 depth, from its dtype and values."""
    if image.dtype == np.uint8:
        what = 'a colour image' if image.ndim == 3 else 'an 8-bit image (a depth visualisation?)'
        return (f'it holds uint8 values: {what}, not raw depth; give the 16-bit depth PNG '
                f'(millimetres, factor_depth 1000, on GraspNet-1Billion and RealSense)')
    valid = image[np.isfinite(image) & (image > 0)] if image.dtype.kind == 'f' else image[image > 0]
    if not valid.size:
        return 'it holds no positive reading'
    lo, hi = float(valid.min()), float(valid.max())
    if image.dtype.kind == 'f' and hi < 20:  # no camera of the datasets sees 20 m
        return (f'it holds {image.dtype} values {lo:.3g}..{hi:.3g}, metres by the look of them: '
                f'save (d * 1000).astype(np.uint16) and use factor_depth 1000')
    return (f'it holds {image.dtype} values {lo:.4g}..{hi:.4g}: save them as raw units, '
            f'np.round(d).astype(np.uint16) if they fit (< 65536), and give factor_depth as '
            f'units per metre (1000 for millimetres)')


def read_depth(depth: DepthInput) -> np.ndarray:
    """A (H, W) uint16 depth image, given as the array or the path of a 16-bit PNG (or a
    ``.npy`` array). Anything else is refused with one line naming the file, what is wrong
    and the fix (float metres, an 8-bit or colour image, a file that is not an image)."""
    if isinstance(depth, str):
        where = depth
        if not os.path.isfile(depth):
            raise FileNotFoundError(f'{depth}: no such depth image')
        if depth.endswith('.npy'):
            try:
                image = np.load(depth, allow_pickle=False)
            except (OSError, ValueError) as err:
                raise ValueError(f'{depth}: cannot read the .npy array ({err})') from None
        else:
            image = cv2.imread(depth, cv2.IMREAD_UNCHANGED)
            if image is None:
                raise ValueError(f'{depth}: cannot decode it as an image; the depth is a 16-bit '
                                 f'PNG (or a .npy array) of raw readings, metres × factor_depth')
    else:
        image, where = depth, 'depth'
    if not isinstance(image, np.ndarray):
        raise TypeError(f'{where}: expected a numpy array or a PNG path, '
                        f'got {type(image).__name__}')
    if image.dtype != np.uint16:
        raise TypeError(f'{where}: depth must be uint16 raw readings (metres × factor_depth), '
                        f'but {_depth_fix(image)}')
    if image.ndim != 2 or min(image.shape) == 0:
        raise ValueError(f'{where}: depth must be (H, W), got shape {image.shape}')
    return image


def check_intrinsics(intrinsics) -> np.ndarray:
    """(3, 3) float64 camera matrix [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] with fx, fy > 0."""
    k = np.asarray(intrinsics, dtype=np.float64)
    if k.shape != (3, 3):
        raise ValueError(f'intrinsics must be a (3, 3) camera matrix, got shape {k.shape}')
    if not np.isfinite(k).all() or k[0, 0] <= 0 or k[1, 1] <= 0 or \
            not np.allclose(k[2], (0, 0, 1)):
        raise ValueError(f'intrinsics must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] with finite '
                         f'fx, fy > 0, got {k.tolist()}')
    return k


def read_rgb(rgb: Union[np.ndarray, str], shape: Sequence[int], index: int) -> np.ndarray:
    """A (H, W, 3) uint8 RGB image of the depth image's ``shape``, given as the array (RGB
    order) or the path of an image file (read as RGB)."""
    if isinstance(rgb, str):
        image = cv2.imread(rgb, cv2.IMREAD_COLOR)
        if image is None:
            raise FileNotFoundError(f'{rgb}: cannot read the colour image')
        image, where = cv2.cvtColor(image, cv2.COLOR_BGR2RGB), rgb
    else:
        image, where = rgb, f'rgb {index}'
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        raise TypeError(f'{where}: colour must be a uint8 (H, W, 3) RGB array or an image '
                        f'path, got {getattr(image, "dtype", type(image).__name__)}')
    if image.shape != (*shape, 3):
        raise ValueError(f'{where}: colour must be (H, W, 3) = {(*shape, 3)} like its depth '
                         f'image, got {image.shape}')
    return image


class GraspInferencer:
    """Predict grasps on depth (or RGB-D) images with a config and a checkpoint.

    The model is built in test mode from ``config.model`` (its ``test_cfg``: the collision
    filter against the whole masked cloud, as tools/test.py runs it). The pipeline is the
    config's ``test_dataloader`` pipeline with :class:`LoadGraspScene` replaced by
    :class:`LoadDepthImage` (same number of points, same draws; the steps after it, such as
    FineGrasp's :class:`EstimateNormals`, as the config has them). A dataset frame given with its
    id ``frame_id=(scene, camera, frame)`` draws its points as the test dataset draws that frame
    (``frame_rng(seed, scene, camera, frame)``), so with its workspace it reproduces what
    tools/test.py dumps for it; an image without an id draws from its own content
    (``image_rng``), the same wherever it sits in a call or a batch.

    Workspace. The models are trained and evaluated on the dataset's masked cloud: readings
    inside the table-frame box of the segmented objects grown by ``LoadGraspScene``'s
    ``outlier`` (graspnet-baseline's workspace mask). A call therefore needs a workspace:
    ``segmentation`` and ``camera_to_table`` apply exactly that rule; ``mask`` gives one of
    one's own. Without either it is refused (unless the config's ``LoadGraspScene`` has
    ``use_workspace=False``, whose rule is every reading): every reading of a camera image,
    walls and floor included, is not what the models saw (on the synthetic scene 100, frames
    0-3: 5/2/4/3 grasps instead of 38/31/29/29). ``mask=depth > 0`` asks for it explicitly.
    Readings beyond ``max_depth`` are dropped in any case (with a warning): they bound the
    collision filter's work (an all-65535 image took 105 s a frame) and catch a wrong
    ``factor_depth``.

    RGB-D models (HGGD: a test pipeline that starts with :class:`LoadRGBDImage`) take the
    colour image too (``rgb=``) and no workspace: HGGD sees the whole image, as its reference
    does. What keeps their grasps off a far background is the reference demo's depth clip
    (``clip_depth``: readings beyond it become it, ``np.clip(depth, 0, 1000)`` mm in
    HGGD's ``demo.py``). The frame's intrinsics are used as given; the model's own test-time
    draws come from (seed, scene, camera, frame) with a ``frame_id`` (as tools/test.py's),
    else from the image's place in the call.

    Camera. A model learns its training camera's view: when a frame's field of view
    (fx / width, fy / height) differs by more than 5 % from the config's GraspNet-1Billion
    camera (``test_dataloader.dataset.camera``; RealSense fx 927.17 at 1280 px, Kinect 631.55)
    the call warns, naming both (GraspClutter6D's cameras are not checked).

    The config is checked as tools/train.py checks it (options nothing reads or a class does
    not take, a string where a number goes: SystemExit naming the key), and its
    ``env_cfg.num_threads``, when set, is torch's thread count while the model predicts (the
    caller's count is restored after), as in tools/test.py: on the CPU the predictions follow
    the thread count.

    Args:
        config: config path or :class:`Config`.
        checkpoint: weights; None keeps the initial weights (with a warning).
        device: where the model runs.
        nms: apply GraspNet's grasp NMS (0.03 m, 30°; as the evaluation does) and sort by score.
        batch_size: frames per forward pass.
        seed: seed of the point sampling (default: the test dataset's).
        max_depth: farthest reading kept, metres.
    """

    def __init__(self, config: Union[str, Config], checkpoint: Optional[str] = None,
                 device: Union[str, torch.device] = 'cpu', nms: bool = True,
                 batch_size: int = 1, seed: Optional[int] = None,
                 max_depth: float = 3.0) -> None:
        register_all_modules(False)
        cfg = Config.fromfile(config) if isinstance(config, str) else copy.deepcopy(config)
        source = config if isinstance(config, str) else 'the config'
        check_config(cfg, source, cfg.to_dict(), set())  # tools/train.py's check
        self.num_threads = config_num_threads(cfg, source)  # tools/test.py's, while predicting
        if batch_size < 1:
            raise ValueError(f'batch_size must be positive, got {batch_size}')
        if not max_depth > 0:
            raise ValueError(f'max_depth must be positive (metres), got {max_depth}')
        self.cfg, self.nms, self.batch_size, self.max_depth = cfg, nms, batch_size, max_depth
        self.model = build_in_scope(MODELS, cfg.model)
        if checkpoint is None:
            warnings.warn('GraspInferencer: no checkpoint, the predictions come from initial '
                          'weights')
        else:
            loaded = _load_checkpoint(checkpoint, map_location='cpu')
            check_checkpoint(self.model, loaded, checkpoint,  # tools/test.py's strict message
                             hint='GraspInferencer loads strictly, as tools/test.py does.')
            _load_checkpoint_to_model(self.model, loaded, strict=True)
        self.model.to(device).eval()
        dataset = cfg.test_dataloader.dataset
        self.seed = dataset.get('seed', 0) if seed is None else seed
        self.pipeline = self._pipeline(dataset.pipeline)

    def _pipeline(self, steps: Sequence[dict]) -> List:
        steps = [dict(s) for s in steps]
        self.with_rgb = bool(steps) and steps[0].get('type') == 'LoadRGBDImage'
        if self.with_rgb:  # the images are given: the rest of the pipeline takes them as read
            self.use_workspace = False
            return [build_in_scope(TRANSFORMS, s) for s in steps[1:]]
        if not steps or steps[0].get('type') != 'LoadGraspScene':
            raise ValueError('GraspInferencer: the test pipeline must start with LoadGraspScene '
                             '(replaced by LoadDepthImage) or LoadRGBDImage (the images given '
                             f'to the call), got {steps[:1]}')
        load = steps[0]
        self.outlier = float(load.get('outlier', 0.02))
        self.use_workspace = bool(load.get('use_workspace', True))
        steps[0] = dict(type='LoadDepthImage', num_points=load.get('num_points', 15000),
                        with_masked_cloud=load.get('with_masked_cloud', False))
        return [build_in_scope(TRANSFORMS, s) for s in steps]

    def _sample(self, index: int, depth: np.ndarray, intrinsics: np.ndarray,
                factor_depth: float, mask: Optional[np.ndarray],
                frame_id: Optional[Sequence], rgb: Optional[np.ndarray] = None) -> dict:
        results = dict(depth=depth, intrinsics=intrinsics, factor_depth=float(factor_depth),
                       workspace_mask=mask, sample_idx=index, epoch=0)
        if frame_id is None:
            results['rng'] = image_rng(self.seed, depth)
        else:
            if len(frame_id) != 3 or not isinstance(frame_id[1], str):
                raise ValueError(f'frame_id {index}: expected (scene, camera, frame), got '
                                 f'{frame_id!r}')
            scene, camera, frame = frame_id
            results['rng'] = frame_rng(self.seed, scene, camera, frame)
        if rgb is not None:  # LoadRGBDImage's keys; the ids key the model's draws
            results.update(rgb=rgb, camera='image')
            if frame_id is not None:
                results.update(scene=scene, camera=camera, frame=frame)
        for transform in self.pipeline:
            results = transform(results)
        return results

    def _workspace(self, i: int, depth: np.ndarray, k: np.ndarray, factor_depth: float,
                   mask, segmentation, camera_to_table) -> np.ndarray:
        """Frame ``i``'s (H, W) bool pixels to keep (see the class docstring)."""
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != bool or mask.shape != depth.shape:
                raise ValueError(f'mask {i}: expected bool {depth.shape}, got {mask.dtype} '
                                 f'{mask.shape}')
        elif segmentation is not None or camera_to_table is not None:
            if segmentation is None or camera_to_table is None:
                raise ValueError(f'frame {i}: the dataset workspace needs both segmentation '
                                 f'and camera_to_table')
            seg, pose = np.asarray(segmentation), np.asarray(camera_to_table, np.float64)
            if seg.shape != depth.shape or pose.shape != (4, 4):
                raise ValueError(f'frame {i}: segmentation must be {depth.shape} and '
                                 f'camera_to_table (4, 4), got {seg.shape} and {pose.shape}')
            mask = workspace_image(depth, seg, k, factor_depth, pose, self.outlier)
        elif self.use_workspace:
            raise ValueError(
                'GraspInferencer needs a workspace: segmentation= and camera_to_table= (the '
                "dataset's rule: the box of the segmented objects in the table frame, grown by "
                f'{self.outlier:g} m), or mask= ((H, W) bool). The models never saw a whole '
                'camera image; mask=depth > 0 keeps every reading if that is what you want')
        else:
            mask = depth > 0  # the config's LoadGraspScene(use_workspace=False): every reading
        limit = self.max_depth * factor_depth
        far = mask & (depth > limit)
        if far.any():
            kept = mask & (depth > 0) & ~far
            seen = depth[mask & (depth > 0)] / factor_depth
            text = (f'frame {i}: {int(far.sum())} of {int((mask & (depth > 0)).sum())} readings '
                    f'in the workspace lie beyond max_depth {self.max_depth:g} m (depth seen '
                    f'{seen.min():.3f}..{seen.max():.3f} m at factor_depth {factor_depth:g})')
            if not kept.any():
                raise ValueError(text + ': no point left. Check factor_depth (raw depth / '
                                 'factor_depth must be metres; GraspNet-1Billion PNGs are '
                                 'millimetres, factor_depth 1000) and invalid readings '
                                 '(65535)')
            warnings.warn(text + '; dropped')
            mask = kept
        return mask

    @staticmethod
    def _check_depth_scale(given, depths, masks, factor_depth: float) -> None:
        """Warn once a call when a workspace's nearest reading is nearer than a depth camera
        sees (a wrong ``factor_depth``), naming the first such image."""
        found = []
        for i, (image, mask) in enumerate(zip(depths, masks)):
            readings = image[mask & (image > 0)]
            name = given[i] if isinstance(given[i], str) else f'depth image {i}'
            text = implausible_depth(readings.min(), factor_depth, name) if readings.size else None
            if text is not None:
                found.append(text)
        if found:
            warnings.warn(found[0] + (f' ({len(found)} of {len(depths)} images)'
                                      if len(depths) > 1 else ''))

    def _check_camera(self, ks: List[np.ndarray], depths: List[np.ndarray]) -> None:
        """Warn once a call when a frame's field of view is not the config's camera's."""
        dataset = self.cfg.test_dataloader.dataset
        camera = dataset.get('camera', 'realsense')
        if dataset.get('layout', 'graspnet') != 'graspnet' or camera not in REFERENCE_INTRINSICS:
            return
        view = lambda k, h, w: np.array([k[0, 0] / w, k[1, 1] / h])  # noqa: E731
        expected = view(REFERENCE_INTRINSICS[camera], 720, 1280)
        for i, (k, d) in enumerate(zip(ks, depths)):
            seen = view(k, *d.shape)
            if np.all(np.abs(seen / expected - 1) <= 0.05):
                continue
            like = [name for name, ref in REFERENCE_INTRINSICS.items()
                    if np.all(np.abs(seen / view(ref, 720, 1280) - 1) <= 0.05)]
            warnings.warn(
                f'frame {i}: intrinsics fx {k[0, 0]:.1f}, fy {k[1, 1]:.1f} at {d.shape[1]} x '
                f'{d.shape[0]} px are not the config\'s camera {camera!r} (fx '
                f'{expected[0] * d.shape[1]:.1f}, fy {expected[1] * d.shape[0]:.1f} at that '
                f'size)' + (f'; they are GraspNet-1Billion\'s {like[0]!r}' if like else '') +
                ': the model learnt that camera\'s view, so its grasps on this frame are off; '
                'use weights trained on the frame\'s camera (e.g. the *_kinect.py configs for '
                'a Kinect)')
            return

    def __call__(self, depth: Union[DepthInput, Sequence[DepthInput]], intrinsics,
                 factor_depth: float = 1000.0, mask=None, segmentation=None,
                 camera_to_table=None, frame_id=None, rgb=None,
                 clip_depth: Optional[float] = None) -> Union[np.ndarray, List[np.ndarray]]:
        """Grasps of one depth image, (N, 17) float32 GraspGroup rows (score, width, height,
        depth, rotation 3×3, translation, object id −1), best first when ``nms``; or a list of
        those for a list of images (the other arguments then one for all, or a list).

        The workspace (see the class docstring): ``segmentation`` ((H, W) object labels, 0 for
        the background) with ``camera_to_table`` ((4, 4) camera pose in the table frame) for
        the dataset's rule, or ``mask`` ((H, W) bool, pixels to keep). ``frame_id``:
        ``(scene, camera, frame)`` of a dataset frame (the test dataset's camera name,
        GraspClutter6D's resolved one such as ``'realsense-d435'``) to draw as tools/test.py
        does for it; a list of those (or None) for a list of images. ``rgb``: the colour
        image(s) of an RGB-D model ((H, W, 3) uint8 RGB arrays or image paths), refused by a
        depth model. ``clip_depth`` (RGB-D models, metres): readings beyond it are set to it
        before the model sees the image, as HGGD's reference demo clips at 1 m; a depth model
        takes a workspace instead.
        """
        single = not isinstance(depth, (list, tuple))
        depths = [read_depth(d) for d in ([depth] if single else depth)]
        if factor_depth is None or not np.isfinite(factor_depth) or factor_depth <= 0:
            raise ValueError(f'factor_depth must be a positive number, got {factor_depth}')

        def per_frame(value, name):
            one = (name == 'intrinsics' and np.asarray(value).shape == (3, 3)) or \
                (name == 'frame ids' and isinstance(value, tuple))
            if isinstance(value, (list, tuple)) and not one:
                if single or len(value) != len(depths):
                    raise ValueError(f'{len(value)} {name} for {len(depths)} depth images')
                return list(value)
            return [value] * len(depths)

        ks = [check_intrinsics(k) for k in per_frame(intrinsics, 'intrinsics')]
        if self.with_rgb != (rgb is not None):
            raise ValueError('GraspInferencer: ' + (
                'this RGB-D model needs the colour image(s): rgb=' if self.with_rgb else
                'this model reads depth only; rgb= has no consumer'))
        rgbs = [None if c is None else read_rgb(c, d.shape, i)
                for i, (c, d) in enumerate(zip(per_frame(rgb, 'colour images'), depths))]
        if clip_depth is not None and not self.with_rgb:
            raise ValueError('GraspInferencer: clip_depth is for RGB-D models (their reference '
                             'clips the image); a depth model takes a workspace: mask=')
        if self.with_rgb:  # the whole image, as the reference
            if any(v is not None for v in (mask, segmentation, camera_to_table)):
                raise ValueError('GraspInferencer: an RGB-D model sees the whole image; mask=, '
                                 'segmentation= and camera_to_table= have no consumer (to '
                                 'drop a far background: clip_depth=)')
            if clip_depth is not None:
                if not np.isfinite(clip_depth) or clip_depth <= 0:
                    raise ValueError(f'clip_depth must be a positive number of metres, got '
                                     f'{clip_depth}')
                limit = min(round(clip_depth * factor_depth), np.iinfo(np.uint16).max)
                depths = [np.minimum(image, np.uint16(limit)) for image in depths]
            masks = [image > 0 for image in depths]
        else:
            masks = [self._workspace(i, *frame) for i, frame in enumerate(zip(
                depths, ks, [factor_depth] * len(depths), per_frame(mask, 'masks'),
                per_frame(segmentation, 'segmentations'), per_frame(camera_to_table, 'poses')))]
        self._check_depth_scale(depth if not single else [depth], depths, masks, factor_depth)
        self._check_camera(ks, depths)
        frame_ids = per_frame(frame_id, 'frame ids')
        grasps = []
        for start in range(0, len(depths), self.batch_size):
            chunk = range(start, min(start + self.batch_size, len(depths)))
            data = pseudo_collate([self._sample(
                i, depths[i], ks[i], factor_depth, None if self.with_rgb else masks[i],
                frame_ids[i], rgbs[i]) for i in chunk])
            with torch.no_grad(), pinned_threads(self.num_threads):
                samples = self.model.test_step(data)
            for sample in samples:
                rows = sample.pred_grasps.detach().cpu().numpy().astype(np.float32)
                grasps.append(grasp_nms(rows).astype(np.float32) if self.nms else rows)
        return grasps[0] if single else grasps
