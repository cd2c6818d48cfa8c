"""HGGD's image path in the loader: per-image grasp records, their rectangles, the cloud draw
and the packing of integer images.

What a worker does per frame is the part of THU-VCLab/HGGD's dataset that is per label and
sequential, in the reference's own numpy arithmetic (``dataset/grasp.py``,
``dataset/base_grasp_dataset.py``): the load-time filter and θ wrap, ``RectGrasp.points``'
int32 corners and the centres and widths taken from them, and the greedy 8-px rule of
``draw_gaussian``. Everything per pixel — resizing, normalising, back-projecting, rendering the
heatmap and the anchor maps — is left to :class:`~mmgrasp.models.HGGDDataPreprocessor` on the
device. The images leave the worker as the integers they were stored as.
"""
import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from mmgrasp.datasets.layouts import open_reader
from mmgrasp.registry import TRANSFORMS
from mmgrasp.storage.labels.hggd_grasps import open_hggd_grasps
from .depth_image import sample_indices
from .formatting import PackGraspInputs

#: The per-image grasp record of a frame: field -> (dtype, trailing shape), exactly as the
#: reference's ``{ann}_view.npz`` (and mmgrasp's per-image grasp store) hold them.
GRASP_FIELDS: Dict[str, Tuple[type, Tuple[int, ...]]] = {
    'centers_2d': (np.float64, (2,)), 'opens_2d': (np.float64, (2,)),
    'thetas_rad': (np.float32, ()), 'gammas_rad': (np.float64, ()),
    'betas_rad': (np.float64, ()), 'widths_2d': (np.float32, ()),
    'heights_2d': (np.float32, ()), 'scores_from_6d': (np.float32, ()),
    'object_ids': (np.int32, ()), 'center_z_depths': (np.float64, ())}

#: HGGD's hard-coded intrinsics of GraspNet-1Billion's two cameras (``dataset/config.py``):
#: its cloud, xyz maps and labels use them, not the per-scene ``camK.npy``.
REFERENCE_INTRINSICS = {
    'realsense': np.array([[927.17, 0, 651.32], [0, 927.37, 349.62], [0, 0, 1]]),
    'kinect': np.array([[631.55, 0, 638.43], [0, 631.21, 366.50], [0, 0, 1]])}

_stores: dict = {}


def open_grasp_store(reader, cache_dir: Optional[str], seed: int = 0,
                     apply_visibility: bool = False):
    """The per-image grasp store of the reader's root and camera (``store.frame(scene, frame)``
    gives a frame's record), built when missing or stale. The one place that names the
    store's reader."""
    return open_hggd_grasps(reader, cache_dir=cache_dir, seed=seed,
                            apply_visibility=apply_visibility)


def reference_intrinsics(layout: Optional[str], camera: str, intrinsics: np.ndarray) -> np.ndarray:
    """The intrinsics HGGD uses: its hard-coded ones for GraspNet-1Billion's RealSense and
    Kinect, the dataset's (``intrinsics``) for any other camera or dataset."""
    if layout == 'graspnet' and camera in REFERENCE_INTRINSICS:
        return REFERENCE_INTRINSICS[camera].copy()
    return np.asarray(intrinsics, np.float64)


def grasp_arrays(record, where: str) -> Dict[str, np.ndarray]:
    """The fields of a grasp record (an object with the :data:`GRASP_FIELDS` attributes or a
    mapping), checked: dtypes, shapes, one row count, finite values."""
    arrays = {}
    for name, (dtype, tail) in GRASP_FIELDS.items():
        try:
            value = np.asarray(record[name] if hasattr(record, 'keys') else
                               getattr(record, name))
        except (KeyError, AttributeError):
            raise ValueError(f'{where}: the grasp record has no field {name!r} (expected '
                             f'{sorted(GRASP_FIELDS)})') from None
        if value.dtype != dtype or value.shape[1:] != tail or value.ndim != 1 + len(tail):
            raise ValueError(f'{where}: grasp field {name!r} is {value.dtype} {value.shape}, '
                             f'expected {np.dtype(dtype)} (n, {", ".join(map(str, tail))}); '
                             'rebuild the per-image grasps (tools/data/build_hggd_labels.py)')
        if value.dtype.kind == 'f' and not np.isfinite(value).all():
            raise ValueError(f'{where}: grasp field {name!r} has non-finite values')
        arrays[name] = value
    counts = {name: len(a) for name, a in arrays.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(f'{where}: grasp fields have different row counts {counts}')
    return arrays


def wrap_thetas(thetas: np.ndarray) -> np.ndarray:
    """θ outside [−π/2, π/2] wrapped by π, in float32 (``RectGraspGroup.load_from_dict``; its
    negation of γ and β there has no consumer in the 2-D targets, the local net's labels are
    the raw rows)."""
    thetas = thetas.copy()
    wrap = (thetas > np.pi / 2) | (thetas < -np.pi / 2)
    thetas[wrap] = (thetas[wrap] + np.float32(np.pi / 2)) % np.float32(np.pi) \
        - np.float32(np.pi / 2)
    return thetas


def rectangle_corners(centers: np.ndarray, thetas: np.ndarray, widths: np.ndarray,
                      heights: np.ndarray) -> np.ndarray:
    """``RectGrasp.points`` of every row: (n, 4, 2) int32 corners (x, y) at the native scale,
    truncated toward zero, with the reference's float32 half-axis and normal (numpy's float32
    sine and cosine) added to the float64 centre."""
    half = (widths / np.float32(2)).astype(np.float32)
    axis = np.stack([half * np.cos(thetas), half * -np.sin(thetas)], -1)
    normal = np.stack([-axis[:, 1], axis[:, 0]], -1)
    length = np.sqrt(normal[:, 0] * normal[:, 0] + normal[:, 1] * normal[:, 1])
    normal = normal / length[:, None] * heights[:, None] / np.float32(2)
    return np.stack([centers + normal + axis, centers + normal - axis,
                     centers - normal - axis, centers - normal + axis], 1).astype(np.int32)


def rectangle_centers(corners: np.ndarray, scale: float) -> Tuple[np.ndarray, np.ndarray]:
    """(n, 2) int32 centres and (n,) float64 widths at the input scale: the corners divided by
    ``scale`` (native width / input width), their mean truncated, the first edge's length."""
    points = corners / scale
    edge = points[:, 0] - points[:, 1]
    return points.mean(1).astype(np.int32), np.sqrt(np.sum(edge * edge, axis=1))


def greedy_centers(centers: np.ndarray, min_distance: float) -> np.ndarray:
    """(n,) bool: the centres ``draw_gaussian`` draws, in label order — those at least
    ``min_distance`` from every centre drawn before them. Only a position's first label can be
    drawn; each drawn centre blocks the disc around it on a grid, so a label costs one look-up."""
    if min_distance <= 0:  # every distance qualifies, repeated positions too
        return np.ones(len(centers), bool)
    kept = np.zeros(len(centers), bool)
    if not len(centers):
        return kept
    reach = int(math.ceil(min_distance))
    low = centers.min(0).astype(np.int64) - reach
    local = centers.astype(np.int64) - low
    span = local.max(0) + reach + 1
    _, first = np.unique(local[:, 0] * span[1] + local[:, 1], return_index=True)
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    disc = np.sqrt(offsets[:, None] ** 2 + offsets[None, :] ** 2) < min_distance
    blocked = np.zeros(span, bool)
    for i in np.sort(first).tolist():
        x, y = local[i].tolist()
        if not blocked[x, y]:
            kept[i] = True
            blocked[x - reach:x + reach + 1, y - reach:y + reach + 1] |= disc
    return kept


def maintain_events(centers: np.ndarray, thetas: np.ndarray, depth: np.ndarray,
                    size: Tuple[int, int], ratio: int, anchor_k: int, half: int = 2) -> int:
    """The most "maintain" events of any (anchor, cell): labels whose depth-window median is 0
    (more than half the window's pixels without a reading) and that are not their (anchor,
    cell)'s first. The device's loop runs that many passes, a count it cannot read back
    without a sync."""
    height, width = depth.shape
    cells = (size[0] // ratio, size[1] // ratio)
    u, v = centers[:, 0] // ratio, centers[:, 1] // ratio
    inside = (u >= 0) & (v >= 0) & (u < cells[0]) & (v < cells[1])
    x = centers[:, 0].astype(np.int64) * width // size[0]
    y = centers[:, 1].astype(np.int64) * width // size[0]
    steps = np.arange(-half, half)
    cols, rows = x[:, None, None] + steps[:, None], y[:, None, None] + steps[None, :]
    window = ((cols >= 0) & (cols < np.minimum(x + half, width - 1)[:, None, None])
              & (rows >= 0) & (rows < np.minimum(y + half, height - 1)[:, None, None]))
    zero = depth[rows.clip(0, height - 1), cols.clip(0, width - 1)] == 0
    depthless = inside & ((zero & window).sum((1, 2)) > window.sum((1, 2)) // 2)
    theta = np.clip(thetas.astype(np.float64), -np.pi / 2 + 1e-8, np.pi / 2 - 1e-8) + np.pi / 2
    anchor = np.floor_divide(theta, np.pi / anchor_k).astype(np.int64)
    key = np.where(inside, (anchor * cells[0] + u) * cells[1] + v, -1)
    later = np.ones(len(key), bool)
    later[np.unique(key, return_index=True)[1]] = False  # each group's first label
    events = depthless & later
    return int(np.bincount(key[events]).max()) if events.any() else 0


@TRANSFORMS.register_module()
class LoadHGGDGrasps(BaseTransform):
    """Attach a frame's per-image grasps and the rectangles HGGD's 2-D targets are made of.

    The record is the frame's row set of the per-image grasp store (:func:`open_grasp_store`),
    shipped whole (the local net's label assignment reads every row, unfiltered and unwrapped,
    as the reference reloads the npz). The rectangles follow the reference's dataset: rows with
    ``widths_2d >= min_width`` and ``scores_from_6d >= min_score``, θ wrapped into [−π/2, π/2]
    (float32), at most ``max_grasps`` of them (drawn without replacement from the sample's
    stream, in drawn order, as its ``random.sample``), then ``RectGrasp.points``' int32
    corners, the centres and widths at the input scale and the greedy ``min_center_distance``
    rule of the heatmap.

    Required Keys:

    - reader (GraspNetReader or GraspClutter6DReader), scene (int), frame (int)
    - depth (np.uint16, (H, W)): raw depth (bounds the device's "maintain" loop)
    - rng (np.random.Generator): only drawn from when a frame has more than ``max_grasps`` rows

    Added Keys:

    - hggd_grasps (dict[str, np.ndarray]): the record's fields (:data:`GRASP_FIELDS`)
    - hggd_rects (dict[str, np.ndarray]): ``centers`` ((m, 2) int32, input scale), ``widths``
      ((m,) float64, input scale), ``thetas`` ((m,) float32, wrapped), ``depths`` ((m,)
      float64, mm) and ``heat_centers`` ((h, 2) int32: the centres the heatmap draws)
    - hggd_max_events (int): see :func:`maintain_events`
    - hggd_grid (tuple): (W_in, H_in, ratio, anchor_k), checked by the preprocessor

    Args:
        input_size: (width, height) of the network's input (640, 360).
        max_grasps: rows kept for the targets (the reference's ``grasp_count``).
        min_width, min_score: the reference's ``load_from_dict`` filter (0, 0.8).
        min_center_distance: the heatmap's greedy rule, input pixels (the reference's 8).
        ratio, anchor_k: anchor cell size in input pixels (8) and θ anchors (6), as the
            preprocessor's (they group the labels whose "maintain" events are counted here).
        label_seed: seed of the store's per-frame draws (:func:`open_hggd_grasps`'s ``seed``).
        apply_visibility: the store drops grasps whose centre no depth point sees (the
            reference saves them; :func:`open_hggd_grasps`).
        cache_dir: the store's cache (default ``$MMGRASP_CACHE``).
    """

    def __init__(self, input_size: Sequence[int] = (640, 360), max_grasps: int = 5000,
                 min_width: float = 0., min_score: float = 0.8,
                 min_center_distance: float = 8., ratio: int = 8, anchor_k: int = 6,
                 label_seed: int = 0, apply_visibility: bool = False,
                 cache_dir: Optional[str] = None):
        if min(max_grasps, ratio, anchor_k) < 1 or min_center_distance < 0:
            raise ValueError(f'LoadHGGDGrasps: max_grasps ({max_grasps}), ratio ({ratio}) and '
                             f'anchor_k ({anchor_k}) must be positive, min_center_distance '
                             f'({min_center_distance}) non-negative')
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.max_grasps = int(max_grasps)
        self.min_width = float(min_width)
        self.min_score = float(min_score)
        self.min_center_distance = float(min_center_distance)
        self.ratio = int(ratio)
        self.anchor_k = int(anchor_k)
        self.label_seed = int(label_seed)
        self.apply_visibility = bool(apply_visibility)
        self.cache_dir = cache_dir

    def store(self, reader):
        """The grasp store of the reader's root and camera, opened once a process."""
        key = (reader.root, reader.camera, self.cache_dir, self.label_seed,
               self.apply_visibility)
        if key not in _stores:
            _stores[key] = open_grasp_store(reader, self.cache_dir, self.label_seed,
                                            self.apply_visibility)
        return _stores[key]

    def prepare(self, data_root: str, camera: Optional[str] = None):
        """Open (and build when needed) the store in the main process, before workers fork
        (GraspNetDataset calls it)."""
        return self.store(open_reader(data_root, camera))

    def transform(self, results: dict) -> dict:
        reader, scene, frame = results['reader'], results['scene'], results['frame']
        where = f'LoadHGGDGrasps: scene {scene} frame {frame} ({reader.camera})'
        grasps = grasp_arrays(self.store(reader).frame(scene, frame), where)
        depth = results['depth']
        height, width = depth.shape
        centers = grasps['centers_2d']
        outside = (centers < 0).any(1) | (centers[:, 0] >= width) | (centers[:, 1] >= height)
        if outside.any():
            raise ValueError(f'{where}: {int(outside.sum())} grasp centres lie outside the '
                             f'{width} x {height} image (e.g. {centers[outside][0]}); the '
                             'per-image grasps were made for another camera or image size')

        keep = np.flatnonzero((grasps['widths_2d'] >= self.min_width)
                              & (grasps['scores_from_6d'] >= self.min_score))
        if len(keep) > self.max_grasps:
            keep = keep[results['rng'].choice(len(keep), self.max_grasps, replace=False)]
        thetas = wrap_thetas(grasps['thetas_rad'][keep])
        corners = rectangle_corners(centers[keep], thetas, grasps['widths_2d'][keep],
                                    grasps['heights_2d'][keep])
        rect_centers, widths = rectangle_centers(corners, width / self.input_size[0])
        heat = greedy_centers(rect_centers, self.min_center_distance)
        results['hggd_grasps'] = grasps
        results['hggd_rects'] = dict(centers=rect_centers, widths=widths, thetas=thetas,
                                     depths=grasps['center_z_depths'][keep],
                                     heat_centers=rect_centers[heat])
        results['hggd_max_events'] = maintain_events(rect_centers, thetas, depth,
                                                     self.input_size, self.ratio, self.anchor_k)
        results['hggd_grid'] = (*self.input_size, self.ratio, self.anchor_k)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(input_size={self.input_size}, '
                f'max_grasps={self.max_grasps}, min_width={self.min_width}, '
                f'min_score={self.min_score}, min_center_distance={self.min_center_distance}, '
                f'ratio={self.ratio}, anchor_k={self.anchor_k}, label_seed={self.label_seed}, '
                f'apply_visibility={self.apply_visibility})')


@TRANSFORMS.register_module()
class SampleDepthPixels(BaseTransform):
    """Draw the pixels of HGGD's scene cloud: ``num_points`` of the pixels with depth > 0,
    without replacement (all of them and the rest with replacement when fewer; pixel 0 when
    the image has no reading, which puts every point at the origin). The device back-projects
    them; only the indices leave the worker.

    Required Keys:

    - depth (np.uint16, (H, W))
    - rng (np.random.Generator)

    Added Keys:

    - point_pixels (np.int64, (num_points,)): row-major pixel indices ``v * W + u``

    Args:
        num_points: points of the cloud (the reference's 25 600).
    """

    def __init__(self, num_points: int = 25600):
        if num_points < 1:
            raise ValueError(f'num_points must be positive, got {num_points}')
        self.num_points = int(num_points)

    def transform(self, results: dict) -> dict:
        pixels = np.flatnonzero(results['depth'].reshape(-1) > 0)
        if len(pixels):
            pixels = pixels[sample_indices(results['rng'], len(pixels), self.num_points)]
        else:
            pixels = np.zeros(self.num_points, np.int64)
        results['point_pixels'] = pixels.astype(np.int64)
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(num_points={self.num_points})'


@TRANSFORMS.register_module()
class PackHGGDInputs(PackGraspInputs):
    """Pack an HGGD frame: the integer images, the cloud's pixels and the intrinsics as inputs;
    the grasp record and the rectangles as small tensors of the data sample.

    Required Keys:

    - rgb (np.uint8, (H, W, 3)), depth (np.uint16, (H, W)), point_pixels (np.int64, (N,))
    - intrinsics (np.float64, (3, 3)): replaced by HGGD's hard-coded ones for
      GraspNet-1Billion's cameras (:func:`reference_intrinsics`; the layout is the reader's)
    - factor_depth (float), camera (str)

    Optional Keys: hggd_grasps, hggd_rects, hggd_max_events, hggd_grid (:class:`LoadHGGDGrasps`).

    Packed: ``inputs`` {rgb, depth, point_pixels, intrinsics} as tensors of the same dtypes;
    ``data_sample.hggd_grasps`` and ``data_sample.hggd_rects`` (dicts of tensors); metainfo
    ``factor_depth``, ``hggd_max_events``, ``hggd_grid`` and the ``meta_keys``.
    """

    def __init__(self, keys: Sequence[str] = ('rgb', 'depth', 'point_pixels', 'intrinsics'),
                 meta_keys: Sequence[str] = ('scene', 'frame', 'camera', 'sample_idx', 'epoch',
                                             'factor_depth', 'hggd_max_events', 'hggd_grid')):
        super().__init__(keys, meta_keys)

    def transform(self, results: dict) -> dict:
        layout = getattr(results.get('reader'), 'layout', None)
        results = dict(results, intrinsics=reference_intrinsics(
            layout, results['camera'], results['intrinsics']))
        packed = super().transform(results)
        sample = packed['data_samples']
        for name in ('hggd_grasps', 'hggd_rects'):  # copied: the store's slices are read-only
            if name in results:
                sample.set_field({k: torch.from_numpy(np.array(v))
                                  for k, v in results[name].items()}, name, dtype=dict)
        return packed
