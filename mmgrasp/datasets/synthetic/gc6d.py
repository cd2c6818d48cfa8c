"""Synthetic GraspClutter6D-layout dataset writer (``make_synthetic.py --layout graspclutter6d``).

The same box objects, table, ray casting and label physics as the GraspNet-1Billion writer
(:mod:`.scene`, :mod:`.labels`), laid out as graspclutter6dAPI reads a download
(see :mod:`.graspclutter6d_reader`): four cameras interleaved in one image sequence (image id =
4·annotation + 1..4) around each scene, BOP JSON poses in millimetres, per-instance amodal and
visible masks, 3-channel label PNGs whose channel 0 is ``obj_id``, depth scaled by 1000
(RealSense) or 10 000 (Azure Kinect, Zivid), per-instance collision labels in ``scene_gt`` order
(self-collision included, so the grasp label files carry points, offsets and scores only, like
the real ones), ``models_m`` / ``models_obj_m`` evaluation assets and ``split_info``. Most scenes
hold one model twice, the case per-instance collision rows exist for.

Deterministic: every draw comes from ``np.random.default_rng((seed, purpose, *index))``.
"""
from __future__ import annotations

import json
import os

import numpy as np

from mmgrasp.geometry.portable import cos, matmul, rigid_inverse, sin

from ..graspclutter6d_reader import CAMERA_INDEX, DEPTH_SCALE, NUM_ANNOTATIONS, NUM_OBJECTS
from .labels import MAX_WIDTH, scene_collision, tolerance_labels
from .scene import (MAX_DEPTH, axis_rotation, camera_intrinsics, grasp_arrays, item_rng,
                    log_progress, look_at, make_model, model_obj, model_ply, model_sdf,
                    place_objects, render, rigid_transform, staged_dataset, write_png)

__all__ = ['write_graspclutter6d_dataset', 'GC6D_CAMERAS']

GC6D_CAMERAS = tuple(CAMERA_INDEX)
#: Intrinsics of each camera: GraspNet's RealSense/Kinect ones, the D415 and Zivid scaled.
_BASE_INTRINSICS = {'realsense-d415': ('realsense', 1.05), 'realsense-d435': ('realsense', 1.0),
                    'azure-kinect': ('kinect', 1.0), 'zivid': ('kinect', 1.2)}


def _intrinsics(camera: str, image_size: tuple[int, int]) -> np.ndarray:
    base, focal = _BASE_INTRINSICS[camera]
    K = camera_intrinsics(base, image_size)
    K[0, 0] *= focal
    K[1, 1] *= focal
    return K


def _json_list(array: np.ndarray) -> list:
    return [float(v) for v in np.asarray(array, np.float64).reshape(-1)]


def _write_json(path: str, payload) -> None:
    with open(path, 'w') as f:
        json.dump(payload, f, indent=1)


def _scene_cameras(rng: np.random.Generator, frames: int) -> dict:
    """Per camera, per annotation: camera pose in the table (world) frame. The four cameras
    look at the table centre from different azimuths and heights; annotations move each
    along an arc about the table's z axis."""
    out = {}
    base_azimuth = rng.uniform(-np.pi, np.pi)
    for k, cam in enumerate(GC6D_CAMERAS):
        height = rng.uniform(0.5, 0.7)
        elev = np.deg2rad(rng.uniform(50, 70))
        azim = base_azimuth + k * np.pi / 2 + rng.uniform(-0.3, 0.3)
        eye = np.array([cos(azim), sin(azim), 0.0]) * height * cos(elev) / sin(elev)
        eye[2] = height
        pose0 = look_at(eye, np.array([*rng.uniform(-0.03, 0.03, 2), 0.03]))
        step = np.deg2rad(min(3.0, 90.0 / max(frames - 1, 1)))
        out[cam] = [matmul(rigid_transform(axis_rotation(2, f * step), (0, 0, 0)), pose0)
                    for f in range(frames)]
    return out


def _write_scene(root: str, seed: int, scene: int, ids: list[int], models: dict, labels: dict,
                 frames: int, grid: tuple[int, int, int], image_size: tuple[int, int],
                 palette: np.ndarray) -> None:
    rng = item_rng(seed, 'gc6d-scene', scene)
    halves = [models[i].half for i in ids]
    obj_wrt_table = place_objects(rng, halves)
    sdir = os.path.join(root, 'scenes', f'{scene:06d}')
    for sub in ('rgb', 'depth', 'label', 'mask', 'mask_visib'):
        os.makedirs(os.path.join(sdir, sub))
    scene_camera, scene_gt = {}, {}
    instance_labels = list(range(1, len(ids) + 1))
    obj_ids = np.array([0] + [i + 1 for i in ids], np.uint8)  # instance label -> obj_id
    for cam, poses in _scene_cameras(rng, frames).items():
        K, scale = _intrinsics(cam, image_size), DEPTH_SCALE[cam]
        for ann, cam_wrt_table in enumerate(poses):
            img = 4 * ann + CAMERA_INDEX[cam]
            w2c = rigid_inverse(cam_wrt_table)
            scene_camera[str(img)] = dict(cam_K=_json_list(K), cam_R_w2c=_json_list(w2c[:3, :3]),
                                          cam_t_w2c=_json_list(w2c[:3, 3] * 1000.0),
                                          depth_scale=1000.0 / scale)
            scene_gt[str(img)] = [dict(obj_id=int(i) + 1, cam_R_m2c=_json_list(m[:3, :3]),
                                       cam_t_m2c=_json_list(m[:3, 3] * 1000.0))
                                  for i, m in zip(ids, [matmul(w2c, p) for p in obj_wrt_table])]
            z, inst, table = render(K, image_size, cam_wrt_table, obj_wrt_table, halves,
                                    instance_labels)
            valid = z <= MAX_DEPTH
            depth = np.round(np.where(valid, z, 0) * scale).astype(np.int64)
            noise = item_rng(seed, 'gc6d-depth-noise', scene, CAMERA_INDEX[cam], ann).integers(
                -1, 2, depth.shape) * int(scale // 1000)
            depth = np.where(table & valid, np.maximum(depth + noise, 1), depth).astype(np.uint16)
            inst[~valid] = 0
            seg = obj_ids[inst]
            shade = np.clip(1.25 - 0.5 * np.where(valid, z, 2.0), 0.3, 1.0)[..., None]
            colour = np.where((table & valid)[..., None], palette[-1], palette[seg])
            rgb = np.where(valid[..., None], colour * shade, 0).astype(np.uint8)
            name = f'{img:06d}.png'
            write_png(os.path.join(sdir, 'rgb', name), rgb[..., ::-1])  # OpenCV writes BGR
            write_png(os.path.join(sdir, 'depth', name), depth)
            write_png(os.path.join(sdir, 'label', name), np.repeat(seg[..., None], 3, axis=2))
            for n, (pose, half) in enumerate(zip(obj_wrt_table, halves)):
                _, alone, _ = render(K, image_size, cam_wrt_table, [pose], [half], [1])
                mask_name = f'{img:06d}_{n:06d}.png'
                write_png(os.path.join(sdir, 'mask', mask_name),
                          np.where(alone > 0, 255, 0).astype(np.uint8))
                write_png(os.path.join(sdir, 'mask_visib', mask_name),
                          np.where(inst == n + 1, 255, 0).astype(np.uint8))
    _write_json(os.path.join(sdir, 'scene_camera.json'), scene_camera)
    _write_json(os.path.join(sdir, 'scene_gt.json'), scene_gt)
    arrays = []
    for n, (mid, pose) in enumerate(zip(ids, obj_wrt_table)):
        model, (mu, width, own) = models[mid], labels[mid]
        others = [(models[m].half, p) for k, (m, p) in enumerate(zip(ids, obj_wrt_table)) if k != n]
        arrays.append(scene_collision(own, mu, width, model.points, grid, pose, others))
    np.savez(os.path.join(root, 'collision_label', f'{scene:06d}.npz'), *arrays)


def write_graspclutter6d_dataset(out: str | os.PathLike, scenes: int = 3, frames: int = 13,
                                 objects: int = 6, models: int | None = None,
                                 points_per_object: int = 2000,
                                 grid: tuple[int, int, int] = (300, 12, 4),
                                 image_size: tuple[int, int] = (1280, 720),
                                 duplicates: int | None = None, seed: int = 0,
                                 progress: bool = True, test_scenes: int = 1,
                                 max_label_width: float = MAX_WIDTH) -> None:
    """Write a deterministic GraspClutter6D-layout dataset of box objects to ``out``.

    Scene ids ``1..scenes`` are the training split, the next ``test_scenes`` ids the test split
    (``split_info``). Each scene holds ``objects`` instances of model ids ``0..models-1``
    (``obj_id`` 1..models; default ``objects + 2`` models); with ``duplicates=K`` the first K
    scenes (default: all but the last scene) hold one model twice. ``frames`` annotations per
    camera (the real dataset has 13). Written to ``out + '.tmp-<pid>'`` and renamed.
    """
    out = os.path.normpath(os.fspath(out))
    models = objects + 2 if models is None else models
    total = scenes + test_scenes
    duplicates = max(total - 1, 0) if duplicates is None else duplicates
    grid, image_size = tuple(map(int, grid)), tuple(map(int, image_size))
    if not 1 <= objects <= models <= NUM_OBJECTS or (duplicates and objects < 2):
        raise ValueError(f'need 1 <= objects <= models <= {NUM_OBJECTS} (and objects >= 2 with '
                         f'duplicates), got objects={objects}, models={models}')
    if min(scenes, points_per_object) < 1 or test_scenes < 0 or \
            not 1 <= frames <= NUM_ANNOTATIONS or not 0 <= duplicates <= total or seed < 0:
        raise ValueError(f'need scenes, points_per_object >= 1, test_scenes >= 0, 1 <= frames <= '
                         f'{NUM_ANNOTATIONS}, 0 <= duplicates <= scenes + test_scenes, seed >= 0')
    if len(grid) != 3 or min(grid) < 1 or len(image_size) != 2 or min(image_size) < 1:
        raise ValueError(f'bad grid {grid} or image_size {image_size}')
    with staged_dataset(out) as tmp:
        for sub in ('scenes', 'grasp_label', 'collision_label', 'tolerance', 'models_m',
                    'models_obj_m', 'split_info'):
            os.makedirs(os.path.join(tmp, sub))
        model_set = {m: make_model(seed, m, points_per_object) for m in range(models)}
        labels = {}
        for m, model in model_set.items():
            log_progress(progress, f'[synthetic gc6d] obj_{m + 1:06d}: {len(model.points)} points')
            name = f'obj_{m + 1:06d}'
            for folder, ext, encode in (('models_m', 'ply', model_ply),
                                        ('models_obj_m', 'obj', model_obj),
                                        ('models_obj_m', 'sdf', model_sdf)):
                with open(os.path.join(tmp, folder, f'{name}.{ext}'), 'wb') as f:
                    f.write(encode(model))
            offsets, collision, scores, width = grasp_arrays(model, grid, max_label_width)
            np.savez(os.path.join(tmp, 'grasp_label', f'{name}_labels.npz'), points=model.points,
                     offsets=offsets, scores=scores)
            del offsets
            np.save(os.path.join(tmp, 'tolerance', f'{name}_tolerance.npy'),
                    tolerance_labels(model.points, scores))
            labels[m] = (scores, width, collision)
        palette = item_rng(seed, 'palette').integers(40, 256, (NUM_OBJECTS + 2, 3)).astype(
            np.float64)
        palette[-1] = (170, 160, 150)  # table
        per_scene = {}
        for n, s in enumerate(range(1, total + 1)):
            rng = item_rng(seed, 'gc6d-scene-objects', s)
            if n < duplicates:
                ids = list(rng.choice(models, objects - 1, replace=False))
                ids.insert(int(rng.integers(0, objects)), ids[int(rng.integers(0, objects - 1))])
            else:
                ids = list(rng.choice(models, objects, replace=False))
            ids = [int(i) for i in ids]
            per_scene[str(s)] = sorted({i + 1 for i in ids})
            log_progress(progress,
                         f'[synthetic gc6d] scene {s:06d}: obj_ids {[i + 1 for i in ids]}, '
                         f'{frames} annotations x {len(GC6D_CAMERAS)} cameras')
            _write_scene(tmp, seed, s, ids, model_set, labels, frames, grid, image_size, palette)
        _write_json(os.path.join(tmp, 'split_info', 'grasp_train_scene_ids.json'),
                    list(range(1, scenes + 1)))
        _write_json(os.path.join(tmp, 'split_info', 'grasp_test_scene_ids.json'),
                    list(range(scenes + 1, total + 1)))
        _write_json(os.path.join(tmp, 'split_info', 'obj_ids_per_scene.json'), per_scene)
    log_progress(progress, f'[synthetic gc6d] wrote {out}')
