"""Synthetic GraspNet-1Billion-style dataset writer.

Real GraspNet data is ~100 GB and cannot be shipped with tests, so this module writes a small,
deterministic dataset in exactly the real on-disk layout (scenes/, grasp_label/, collision_label/,
tolerance/, models/), including what graspnetAPI's evaluation reads: ``annotations/%04d.xml`` per
frame (poses model -> current camera, equal to the meta poses), test-split scenes (ids 100-189,
``test_scenes``), and per model a dense ``nontextured.ply`` (2.5 mm surface grid), the box mesh
``textured.obj`` and a dexnet ``textured.sdf`` (``box_sdf_grid``). Objects are boxes of 3-8 cm
resting on a finite table; depth and segmentation are ray-cast exactly, so geometry checks
(back-projection, poses, workspace masks) hold to the millimetre. With ``shapes`` the models
are also spheres, upright cylinders, capsules, tori and L-shaped plates (:mod:`.shapes`):
sphere-traced on their exact signed distance, labelled by ``labels.shape_grasp_labels``,
their PLY files ASCII or binary (``ply_formats``).

Grasp labels follow the evaluator's physics (:mod:`.labels`): analytic jaw contacts on the
box, dexnet's antipodal force-closure test for μ on the 0.1 grid, graspnetAPI's gripper against
the box (self-collision) and against the other boxes and the table (scene collision). On the
real 300x12x4 grid (12 models of 300 points, seed 0) 97.6 % of cells are infeasible (μ = -1;
96.9-99.0 % per model; real labels: 93-98 %); about half of the feasible cells are free of
self-collision; μ covers all ten values (shares 0.1: 6 %, 0.3: 16 %, 0.6: 14 %, 1.0: 4 %);
feasible widths are at most 0.1 m (wider chords are infeasible, their widths are kept; with
``max_label_width`` above 0.1, wider chords keep their μ as in the real labels); 1-2 %
of tolerance cells are non-zero, up to 0.03-0.05 m.

Every random draw comes from ``np.random.default_rng((seed, purpose, *index))`` so each scene,
object or frame is generated independently and the output is byte-identical for the same
arguments.
"""
from __future__ import annotations

import io
import os
from collections.abc import Sequence

import numpy as np
import scipy.io

from mmgrasp.geometry.portable import cos, matmul, norm, rigid_inverse, sin, transform

from .labels import MAX_WIDTH, points_collision, scene_collision, tolerance_labels
from .scene import (MAX_DEPTH, SyntheticModel, axis_rotation, camera_intrinsics, eval_points,
                    grasp_arrays, item_rng, log_progress, look_at, make_model, model_obj,
                    model_ply, model_sdf, place_objects, render, rigid_transform,
                    staged_dataset, write_png)
from .shapes import SHAPES

__all__ = ['write_synthetic_dataset', 'MU_VALUES', 'TOLERANCE_RADII', 'RS_WRT_KN', 'MAX_MODELS',
           'TEST_SPLITS', 'PLY_FORMATS']

MAX_MODELS = 88
FACTOR_DEPTH = 1000.0
#: The ten feasible friction coefficients (a 0.1 grid); infeasible cells hold exactly -1.
MU_VALUES = np.array([np.float32(np.round(k * 0.1, 1)) for k in range(1, 11)], np.float32)
#: Tolerance radii used by graspnet-baseline's generate_tolerance_label.py (0 ... 0.050 m).
TOLERANCE_RADII = np.float32(np.round(np.arange(51) * 0.001, 3))
_CAMERA_CODE = {'realsense': 0, 'kinect': 1}
#: Scene ids of the test splits (graspnet.md §1): seen, similar, novel.
TEST_SPLITS = {'test_seen': range(100, 130), 'test_similar': range(130, 160),
               'test_novel': range(160, 190)}
PLY_FORMATS = ('ascii', 'binary')
_MAT_HEADER = b'MATLAB 5.0 MAT-file, Platform: posix, written by mmgrasp.datasets.synthetic'
#: Fixed RealSense pose in the Kinect frame (both cameras ride on the same arm).
RS_WRT_KN = rigid_transform(matmul(axis_rotation(0, np.deg2rad(2.0)),
                                   axis_rotation(1, np.deg2rad(-3.0))), (0.06, -0.02, 0.01))


def _quaternion(r: np.ndarray) -> np.ndarray:
    """w x y z unit quaternion (w >= 0) of a rotation matrix."""
    w = np.sqrt(max(0.0, 1 + np.trace(r))) / 2
    x = np.sqrt(max(0.0, 1 + r[0, 0] - r[1, 1] - r[2, 2])) / 2
    y = np.sqrt(max(0.0, 1 - r[0, 0] + r[1, 1] - r[2, 2])) / 2
    z = np.sqrt(max(0.0, 1 - r[0, 0] - r[1, 1] + r[2, 2])) / 2
    x = np.copysign(x, r[2, 1] - r[1, 2])
    y = np.copysign(y, r[0, 2] - r[2, 0])
    z = np.copysign(z, r[1, 0] - r[0, 1])
    q = np.array([w, x, y, z])
    return q / norm(q)


def annotation_xml(ids: Sequence[int], poses: Sequence[np.ndarray],
                    kinds: Sequence[str] | None = None) -> str:
    """``annotations/%04d.xml`` as graspnetAPI's xmlWriter lays it out (children read by position:
    obj_id, obj_name, obj_path, pos_in_world, ori_in_world as w x y z); poses model -> camera."""
    lines = ['<?xml version="1.0" ?>', '<scene>']
    for obj_id, pose, kind in zip(ids, poses, kinds or ['box'] * len(ids)):
        t, q = pose[:3, 3], _quaternion(pose[:3, :3])
        lines += ['    <obj>', f'        <obj_id>{obj_id}</obj_id>',
                  f'        <obj_name>{kind}_{obj_id:03d}</obj_name>',
                  f'        <obj_path>models/{obj_id:03d}/textured.obj</obj_path>',
                  f'        <pos_in_world>{t[0]:.8f} {t[1]:.8f} {t[2]:.8f}</pos_in_world>',
                  f'        <ori_in_world>{q[0]:.8f} {q[1]:.8f} {q[2]:.8f} {q[3]:.8f}'
                  '</ori_in_world>', '    </obj>']
    return '\n'.join(lines + ['</scene>']) + '\n'


def _kind(model: SyntheticModel) -> str:
    return 'box' if model.shape is None else model.shape.kind


def savemat_bytes(mdict: dict) -> bytes:
    """scipy stamps the creation time into the header; a fixed header keeps files reproducible."""
    buf = io.BytesIO()
    scipy.io.savemat(buf, mdict)
    data = bytearray(buf.getvalue())
    data[:116] = _MAT_HEADER.ljust(116, b' ')
    return bytes(data)


def _write_scene(root: str, seed: int, scene: int, ids: list[int],
                 models: dict[int, SyntheticModel],
                 labels: dict, frames: int, grid: tuple[int, int, int],
                 image_size: tuple[int, int], cameras: Sequence[str], palette: np.ndarray) -> None:
    rng = item_rng(seed, 'scene', scene)
    halves = [models[i].half for i in ids]
    obj_wrt_table = place_objects(rng, halves)
    sdir = os.path.join(root, 'scenes', f'scene_{scene:04d}')
    os.makedirs(sdir)
    with open(os.path.join(sdir, 'object_id_list.txt'), 'w') as f:
        f.write(''.join(f'{i}\n' for i in ids))
    np.save(os.path.join(sdir, 'rs_wrt_kn.npy'), RS_WRT_KN)

    # Kinect frame-0 pose: 0.5-0.7 m above the table, tilted 50-70 deg; RealSense rides along.
    height = rng.uniform(0.5, 0.7)
    elev = np.deg2rad(rng.uniform(50, 70))
    azim = rng.uniform(-np.pi, np.pi)
    eye = np.array([cos(azim), sin(azim), 0.0]) * height * cos(elev) / sin(elev)
    eye[2] = height
    kn0 = look_at(eye, np.array([*rng.uniform(-0.03, 0.03, 2), 0.03]))
    step = np.deg2rad(min(3.0, 90.0 / max(frames - 1, 1))) * (1 if rng.random() < 0.5 else -1)
    # about the table z axis
    arc = [rigid_transform(axis_rotation(2, f * step), (0, 0, 0)) for f in range(frames)]

    cls_indexes = np.array([[i + 1 for i in ids]], np.int64)
    for cam in cameras:
        cam0 = kn0 if cam == 'kinect' else matmul(kn0, RS_WRT_KN)
        cam0_inv = rigid_inverse(cam0)
        camera_poses = np.stack([matmul(matmul(cam0_inv, a), cam0) for a in arc])
        K = camera_intrinsics(cam, image_size)
        cdir = os.path.join(sdir, cam)
        for sub in ('rgb', 'depth', 'label', 'meta', 'annotations'):
            os.makedirs(os.path.join(cdir, sub))
        np.save(os.path.join(cdir, 'camK.npy'), K)
        np.save(os.path.join(cdir, 'camera_poses.npy'), camera_poses)
        np.save(os.path.join(cdir, 'cam0_wrt_table.npy'), cam0)
        for f in range(frames):
            cam_wrt_table = matmul(cam0, camera_poses[f])
            z, seg, table = render(K, image_size, cam_wrt_table, obj_wrt_table, halves,
                                   [i + 1 for i in ids], [models[i].shape for i in ids])
            valid = z <= MAX_DEPTH
            depth = np.round(np.where(valid, z, 0) * FACTOR_DEPTH).astype(np.int32)
            noise_rng = item_rng(seed, 'depth-noise', scene, _CAMERA_CODE[cam], f)
            noise = noise_rng.integers(-1, 2, depth.shape)
            depth = np.where(table & valid, np.maximum(depth + noise, 1), depth).astype(np.uint16)
            seg[~valid] = 0
            shade = np.clip(1.25 - 0.5 * np.where(valid, z, 2.0), 0.3, 1.0)[..., None]
            colour = np.where((table & valid)[..., None], palette[-1], palette[seg])
            rgb = np.where(valid[..., None], colour * shade, 0).astype(np.uint8)
            name = f'{f:04d}'
            write_png(os.path.join(cdir, 'rgb', name + '.png'), rgb[..., ::-1])  # OpenCV writes BGR
            write_png(os.path.join(cdir, 'depth', name + '.png'), depth)
            write_png(os.path.join(cdir, 'label', name + '.png'), seg)
            obj_wrt_cam = [matmul(rigid_inverse(cam_wrt_table), p) for p in obj_wrt_table]
            poses = np.stack([m[:3] for m in obj_wrt_cam], axis=2).astype(np.float32)
            with open(os.path.join(cdir, 'annotations', name + '.xml'), 'w') as fh:
                fh.write(annotation_xml(ids, obj_wrt_cam,
                                         [_kind(models[i]) for i in ids]))
            meta = {'poses': poses, 'cls_indexes': cls_indexes, 'intrinsic_matrix': K,
                    'factor_depth': np.array([[FACTOR_DEPTH]], np.float64)}
            with open(os.path.join(cdir, 'meta', name + '.mat'), 'wb') as fh:
                fh.write(savemat_bytes(meta))

    # Scene collisions: the same gripper against the other objects and the table
    # (labels.py): boxes against boxes in closed form, curved shapes by their points.
    arrays = []
    for n, (mid, pose) in enumerate(zip(ids, obj_wrt_table)):
        model, (mu, width, own) = models[mid], labels[mid]
        others = [(models[m], p) for k, (m, p) in enumerate(zip(ids, obj_wrt_table)) if k != n]
        inv = rigid_inverse(pose)
        curved = [transform(eval_points(o), matmul(inv, p)) for o, p in others
                  if model.shape is not None or o.shape is not None]
        obstacles = np.concatenate(curved) if curved else np.zeros((0, 3))
        if model.shape is None:
            boxes = [(o.half, p) for o, p in others if o.shape is None]
            collision = scene_collision(own, mu, width, model.points, grid, pose, boxes)
            if len(obstacles):
                collision = points_collision(mu, width, model.points, grid, obstacles,
                                             skip=collision)
        else:
            collision = points_collision(mu, width, model.points, grid, obstacles,
                                         table_pose=pose, skip=own)
        arrays.append(collision)
    cdir = os.path.join(root, 'collision_label', f'scene_{scene:04d}')
    os.makedirs(cdir)
    np.savez(os.path.join(cdir, 'collision_labels.npz'), *arrays)


def write_synthetic_dataset(out: str | os.PathLike, scenes: int = 4, frames: int = 4,
                            objects: int = 10, models: int | None = None,
                            points_per_object: int = 2000,
                            grid: tuple[int, int, int] = (300, 12, 4),
                            image_size: tuple[int, int] = (1280, 720),
                            cameras: Sequence[str] = ('realsense', 'kinect'),
                            duplicates: int = 0, seed: int = 0, progress: bool = True,
                            test_scenes: Sequence[int] = (),
                            max_label_width: float = MAX_WIDTH,
                            shapes: Sequence[str] = ('box', ),
                            ply_formats: Sequence[str] = ('ascii', )) -> None:
    """Write a deterministic GraspNet-1Billion-layout dataset to ``out``.

    Training scenes get ids ``0..scenes-1``; ``test_scenes`` adds scenes with those ids (100-189:
    seen 100-129, similar 130-159, novel 160-189), written the same way, for the evaluator.
    ``objects`` instances per scene are drawn from model ids ``0..models-1`` (default
    ``objects + 2``); label files are written for every model id. With ``duplicates=K`` the first
    K scenes contain one model twice (``objects`` instances in total). Everything is written to
    ``out + '.tmp-<pid>'`` and renamed at the end, so ``out`` is never half-written.
    ``max_label_width`` above the gripper's 0.1 m keeps μ for wider chords, as the real labels
    do, so that the recipes' width mask has cells to act on (the tests use it).
    Model ``m`` is a ``shapes[m % len(shapes)]`` (``SHAPES``: box, sphere, cylinder, capsule,
    torus, lshape; see :mod:`.shapes`) and its ``nontextured.ply`` is written in
    ``ply_formats[m % len(ply_formats)]`` (``ascii`` or ``binary``, little-endian float32).
    """
    out = os.path.normpath(os.fspath(out))
    models = objects + 2 if models is None else models
    grid, image_size, cameras = tuple(map(int, grid)), tuple(map(int, image_size)), list(cameras)
    if not 1 <= objects <= models <= MAX_MODELS or (duplicates and objects < 2):
        raise ValueError(f'need 1 <= objects <= models <= {MAX_MODELS} (and objects >= 2 with '
                         f'duplicates), got objects={objects}, models={models}')
    if min(scenes, frames, points_per_object) < 1 or not 0 <= duplicates <= scenes or seed < 0:
        raise ValueError('need scenes, frames, points_per_object >= 1, 0 <= duplicates <= scenes '
                         'and seed >= 0')
    test_scenes = [int(s) for s in test_scenes]
    if scenes > 100 or len(set(test_scenes)) != len(test_scenes) or \
            not all(100 <= s < 190 for s in test_scenes):
        raise ValueError(f'need scenes <= 100 (training ids 0-99) and distinct test_scenes in '
                         f'100-189, got scenes={scenes}, test_scenes={test_scenes}')
    if len(grid) != 3 or min(grid) < 1 or len(image_size) != 2 or min(image_size) < 1:
        raise ValueError(f'bad grid {grid} or image_size {image_size}')
    if not cameras or len(set(cameras)) != len(cameras):
        raise ValueError(f'cameras must be a non-empty list without repeats, got {cameras}')
    for cam in cameras:
        camera_intrinsics(cam)  # validates the name
    shapes, ply_formats = list(shapes), list(ply_formats)
    if not shapes or not set(shapes) <= set(SHAPES) or not ply_formats or \
            not set(ply_formats) <= set(PLY_FORMATS):
        raise ValueError(f'shapes must be a non-empty list of {SHAPES} and ply_formats of '
                         f'{PLY_FORMATS}, got {shapes} and {ply_formats}')
    with staged_dataset(out) as tmp:
        model_set = {m: make_model(seed, m, points_per_object, shapes[m % len(shapes)])
                     for m in range(models)}
        for sub in ('scenes', 'grasp_label', 'collision_label', 'tolerance', 'models'):
            os.makedirs(os.path.join(tmp, sub))
        labels = {}
        for m, model in model_set.items():
            log_progress(progress,
                         f'[synthetic] object {m:03d} ({_kind(model)}): {len(model.points)} '
                         f'points, grid {grid}')
            mdir = os.path.join(tmp, 'models', f'{m:03d}')
            os.makedirs(mdir)
            files = (('nontextured.ply', model_ply(model, ply_formats[m % len(ply_formats)])),
                     ('textured.obj', model_obj(model)), ('textured.sdf', model_sdf(model)))
            for name, data in files:
                with open(os.path.join(mdir, name), 'wb') as f:
                    f.write(data)
            offsets, collision, scores, width = grasp_arrays(model, grid, max_label_width)
            np.savez(os.path.join(tmp, 'grasp_label', f'{m:03d}_labels.npz'), points=model.points,
                     offsets=offsets, collision=collision, scores=scores)
            del offsets
            np.save(os.path.join(tmp, 'tolerance', f'{m:03d}_tolerance.npy'),
                    tolerance_labels(model.points, scores))
            labels[m] = (scores, width, collision)
        palette = item_rng(seed, 'palette').integers(40, 256, (MAX_MODELS + 2, 3)).astype(
            np.float64)
        palette[-1] = (170, 160, 150)  # table
        for s in [*range(scenes), *test_scenes]:
            rng = item_rng(seed, 'scene-objects', s)
            if s < duplicates:
                ids = list(rng.choice(models, objects - 1, replace=False))
                ids.insert(int(rng.integers(0, objects)), ids[int(rng.integers(0, objects - 1))])
            else:
                ids = list(rng.choice(models, objects, replace=False))
            ids = [int(i) for i in ids]
            log_progress(progress,
                         f'[synthetic] scene {s:04d}: objects {ids}, {frames} frames x {cameras}')
            _write_scene(tmp, seed, s, ids, model_set, labels, frames, grid, image_size, cameras,
                         palette)
    log_progress(progress, f'[synthetic] wrote {out}')
