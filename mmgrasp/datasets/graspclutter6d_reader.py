"""Reader for the GraspClutter6D on-disk layout (graspclutter6dAPI 0.0.3's; real downloads and the
synthetic writer's), behind the same source protocol as :class:`GraspNetReader`.

Layout (BOP-style)::

    scenes/%06d/{rgb,depth,label}/%06d.png        by image id
    scenes/%06d/{mask,mask_visib}/%06d_%06d.png   image id, instance (scene_gt position)
    scenes/%06d/scene_camera.json                 per image id: cam_K, cam_R_w2c, cam_t_w2c (mm)
    scenes/%06d/scene_gt.json                     per image id: [{obj_id, cam_R_m2c, cam_t_m2c}]
    grasp_label/obj_%06d_labels.npz               points, offsets, scores (collision optional)
    collision_label/%06d.npz                      arr_i per scene_gt instance, in that order
    models_m/obj_%06d.ply, models_obj_m/obj_%06d.{obj,sdf}
    split_info/grasp_{train,test}_scene_ids.json, split_info/obj_ids_per_scene.json

Four cameras share one image sequence: image id = 4·annotation + index (1 realsense-d415,
2 realsense-d435, 3 azure-kinect, 4 zivid); ``'realsense'`` and ``'kinect'`` name the d435 and
the Azure Kinect, as in the API. A *frame* here is the annotation index of the reader's camera
(0..12). Object ids are 0-based inside mmgrasp (``obj_id - 1``), so that the label PNG's channel
0, which stores ``obj_id``, is "object id + 1" exactly as on GraspNet-1Billion. Poses and camera
translations are stored in millimetres and returned in metres. Every error names the file.
"""
import json
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import cv2
import numpy as np

from mmgrasp.storage.source import DatasetFileError
from .graspnet_reader import (DerivedLabelFiles, FrameMeta, NpzArchive, ObjectPoses, check_array,
                              grasp_label_arrays, read_rgb_png, require_file)

CAMERA_INDEX = {'realsense-d415': 1, 'realsense-d435': 2, 'azure-kinect': 3, 'zivid': 4}
CAMERA_ALIASES = {'realsense': 'realsense-d435', 'kinect': 'azure-kinect'}
#: The API's hard-coded depth scales (raw value / scale = metres).
DEPTH_SCALE = {'realsense-d415': 1000.0, 'realsense-d435': 1000.0, 'azure-kinect': 10000.0,
               'zivid': 10000.0}
NUM_ANNOTATIONS = 13
NUM_OBJECTS = 200  # obj_id 1..200
SPLITS = ('train', 'test', 'all')
VISIBILITY_THRESHOLD = 0.05  # loadGrasp skips instances seen less than this


def camera_name(camera: str) -> str:
    """The real camera name of ``camera`` (aliases resolved); ValueError for an unknown one."""
    name = CAMERA_ALIASES.get(camera, camera)
    if name not in CAMERA_INDEX:
        raise ValueError(f'camera={camera!r}: expected one of {sorted(CAMERA_INDEX)} or an '
                         f'alias {sorted(CAMERA_ALIASES)}')
    return name


def image_id(annotation: int, camera: str) -> int:
    """The API's ``annId2ImgId``: 4·annotation + the camera's index."""
    return 4 * int(annotation) + CAMERA_INDEX[camera_name(camera)]


def _load_json(path: str):
    require_file(path)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise DatasetFileError(path, f'cannot read JSON ({exc})') from exc


@dataclass(frozen=True)
class SceneCameras:
    """Where each frame's camera is, from ``scene_camera.json``: world -> camera per frame."""
    world_to_camera: np.ndarray  # (F, 4, 4) float64, metres

    def camera_to_table(self, frame: int) -> np.ndarray:
        """(4, 4) camera -> world (the table frame of the workspace box)."""
        return np.linalg.inv(self.world_to_camera[frame])


class GraspClutter6DReader(DerivedLabelFiles):
    """Paths and loaders for one GraspClutter6D root and camera.

    Args:
        root: the dataset root (holds ``scenes/``, ``grasp_label/``, ``collision_label/``).
        camera: one of :data:`CAMERA_INDEX` or an alias (``'realsense'``, ``'kinect'``).
        tolerance_dir: where ``obj_%06d_tolerance.npy`` live; default ``<root>/tolerance``.
        graspness_dir: where GSNet's ``%06d/<camera>/%06d.npy`` (scene, image id) live; default
            ``<root>/graspness``.
    """

    layout = 'graspclutter6d'
    cameras = tuple(CAMERA_INDEX)

    def __init__(self, root: str, camera: str = 'realsense', tolerance_dir: Optional[str] = None,
                 graspness_dir: Optional[str] = None):
        self.camera = camera_name(camera)
        if not os.path.isdir(os.path.join(root, 'scenes')):
            raise DatasetFileError(os.path.join(root, 'scenes'),
                                   'not a GraspClutter6D root: no scenes/ folder')
        self.root = os.path.abspath(root)
        self.tolerance_dir = tolerance_dir or os.path.join(self.root, 'tolerance')
        self.graspness_dir = graspness_dir or os.path.join(self.root, 'graspness')
        self._cameras: Dict[int, SceneCameras] = {}
        self._scene_camera: Dict[int, dict] = {}
        self._metas: Dict[int, List[FrameMeta]] = {}
        self._instances: Dict[int, tuple] = {}
        self._collision_counts: Dict[int, Optional[int]] = {}
        self._frame_counts: Dict[int, int] = {}

    # ---------------------------------------------------------------- paths
    @staticmethod
    def check_scene(scene: int) -> int:
        if not 0 <= int(scene) <= 999999:
            raise ValueError(f'scene id {scene} out of range 0..999999')
        return int(scene)

    @staticmethod
    def check_object(obj: int) -> int:
        if not 0 <= int(obj) < NUM_OBJECTS:
            raise ValueError(f'object id {obj} out of range 0..{NUM_OBJECTS - 1} (obj_id - 1)')
        return int(obj)

    def scene_dir(self, scene: int) -> str:
        return os.path.join(self.root, 'scenes', f'{self.check_scene(scene):06d}')

    def camera_dir(self, scene: int) -> str:
        """All cameras share the scene folder."""
        return self.scene_dir(scene)

    def image_id(self, frame: int) -> int:
        return image_id(frame, self.camera)

    def frame_path(self, scene: int, kind: str, frame: int) -> str:
        """``kind`` in depth/label/rgb (PNG by image id); ``meta`` is ``scene_gt.json`` (the
        instances and poses of every frame)."""
        if kind == 'meta':
            return os.path.join(self.scene_dir(scene), 'scene_gt.json')
        return os.path.join(self.scene_dir(scene), kind, f'{self.image_id(frame):06d}.png')

    def mask_path(self, scene: int, frame: int, instance: int, visible: bool) -> str:
        return os.path.join(self.scene_dir(scene), 'mask_visib' if visible else 'mask',
                            f'{self.image_id(frame):06d}_{int(instance):06d}.png')

    def scene_camera_path(self, scene: int) -> str:
        return os.path.join(self.scene_dir(scene), 'scene_camera.json')

    def grasp_label_path(self, obj: int) -> str:
        return os.path.join(self.root, 'grasp_label',
                            f'obj_{self.check_object(obj) + 1:06d}_labels.npz')

    def collision_label_path(self, scene: int) -> str:
        return os.path.join(self.root, 'collision_label', f'{self.check_scene(scene):06d}.npz')

    def tolerance_path(self, obj: int) -> str:
        return os.path.join(self.tolerance_dir,
                            f'obj_{self.check_object(obj) + 1:06d}_tolerance.npy')

    def graspness_path(self, scene: int, frame: int) -> str:
        return os.path.join(self.graspness_dir, f'{self.check_scene(scene):06d}', self.camera,
                            f'{self.image_id(frame):06d}.npy')

    def model_points_path(self, obj: int) -> str:
        return os.path.join(self.root, 'models_m', f'obj_{self.check_object(obj) + 1:06d}.ply')

    def model_sdf_path(self, obj: int) -> str:
        return os.path.join(self.root, 'models_obj_m', f'obj_{self.check_object(obj) + 1:06d}.sdf')

    # ---------------------------------------------------------------- scenes (source protocol)
    def present_scenes(self) -> List[int]:
        """Scenes (any split) with a ``scene_camera.json``, in id order."""
        found = []
        for name in os.listdir(os.path.join(self.root, 'scenes')):
            if re.fullmatch(r'\d{6}', name) and os.path.isfile(
                    os.path.join(self.root, 'scenes', name, 'scene_camera.json')):
                found.append(int(name))
        return sorted(found)

    def collision_scenes(self) -> List[int]:
        folder = os.path.join(self.root, 'collision_label')
        if not os.path.isdir(folder):
            return []
        return sorted(int(n[:-4]) for n in os.listdir(folder) if re.fullmatch(r'\d{6}\.npz', n))

    def scene_ids(self, split: str) -> List[int]:
        """Scenes of ``split`` (``split_info/grasp_<split>_scene_ids.json``; 'all' is train then
        test, as in the API) present on disk."""
        if split not in SPLITS:
            raise ValueError(f'split={split!r}: expected one of {SPLITS}')
        ids: List[int] = []
        for part in (('train', 'test') if split == 'all' else (split,)):
            path = os.path.join(self.root, 'split_info', f'grasp_{part}_scene_ids.json')
            listed = _load_json(path)
            try:
                ids += [int(x) for x in listed]
            except (TypeError, ValueError) as exc:
                raise DatasetFileError(path, f'expected a list of scene ids ({exc})') from exc
        present = set(self.present_scenes())
        kept = [s for s in ids if s in present]
        if not kept:
            raise DatasetFileError(os.path.join(self.root, 'scenes'),
                                   f'no scene of split {split!r} is on disk')
        return kept

    def scene_source_files(self, scene: int) -> List[str]:
        """The files the label store's rows of a scene come from."""
        return [self.collision_label_path(scene), self.frame_path(scene, 'meta', 0)]

    def trajectory_files(self, scene: int) -> List[str]:
        """Per-scene files the frame store's frames depend on besides their own."""
        return [self.scene_camera_path(scene), self.frame_path(scene, 'meta', 0)]

    # ---------------------------------------------------------------- cameras and frames
    def _camera_entries(self, scene: int) -> dict:
        if scene not in self._scene_camera:
            self._scene_camera[scene] = _load_json(self.scene_camera_path(scene))
        return self._scene_camera[scene]

    def num_frames(self, scene: int) -> int:
        """Annotations of the reader's camera, 0..F-1, the same in every per-image file of the
        layout: ``scene_camera.json``, ``scene_gt.json`` and the ``depth``, ``label`` and
        ``rgb`` PNGs (the per-instance masks are named when a frame reads them). A missing
        image followed by a present one, or an image one of them holds and another lacks (a
        last annotation missing from ``scene_camera.json`` would otherwise drop its frame
        silently), is an error naming the file and the image."""
        if scene not in self._frame_counts:
            self._frame_counts[scene] = self._count_frames(scene)
        return self._frame_counts[scene]

    def _count_frames(self, scene: int) -> int:
        entries = self._camera_entries(scene)
        count = 0
        while count < NUM_ANNOTATIONS and str(image_id(count, self.camera)) in entries:
            count += 1
        if count == 0:
            raise DatasetFileError(self.scene_camera_path(scene),
                                   f'no image of camera {self.camera} (image ids '
                                   f'{image_id(0, self.camera)}, {image_id(1, self.camera)}, ...)')
        later = [a for a in range(count + 1, NUM_ANNOTATIONS)
                 if str(image_id(a, self.camera)) in entries]
        if later:  # a hole, not a shorter scene: the frames after it would silently drop out
            raise DatasetFileError(
                self.scene_camera_path(scene),
                f'no entry for image {image_id(count, self.camera)} (camera {self.camera}, '
                f'annotation {count}) while annotation {later[0]}\'s image '
                f'{image_id(later[0], self.camera)} is there: a camera\'s images must be '
                f'annotations 0..F-1 without a gap')
        self._check_images_agree(scene, count)
        return count

    def _check_images_agree(self, scene: int, count: int) -> None:
        """Every per-image file holds annotations 0..count-1 of the camera and no other."""
        gt_path = self.frame_path(scene, 'meta', 0)
        gt = _load_json(gt_path)
        for annotation in range(NUM_ANNOTATIONS):
            image = image_id(annotation, self.camera)
            listed = annotation < count
            held = [(gt_path, str(image) in gt)] + [
                (self.frame_path(scene, kind, annotation),
                 os.path.isfile(self.frame_path(scene, kind, annotation)))
                for kind in ('depth', 'label', 'rgb')]
            for path, has in held:
                if has == listed:
                    continue
                if listed:
                    what = 'no entry for' if path == gt_path else 'no file for'
                    raise DatasetFileError(
                        path, f'{what} image {image} (camera {self.camera}, annotation '
                              f'{annotation}) while {self.scene_camera_path(scene)} lists it: '
                              f'every per-image file of a scene must hold the same images')
                raise DatasetFileError(
                    self.scene_camera_path(scene),
                    f'no entry for image {image} (camera {self.camera}, annotation '
                    f'{annotation}) while {path} holds it: every per-image file of a scene must '
                    f'hold the same images (restore the entry, or remove the image everywhere '
                    f'to end the scene at annotation {count - 1})')

    def _check_frame(self, scene: int, frame: int) -> None:
        n = self.num_frames(scene)
        if not 0 <= frame < n:
            raise ValueError(f'frame {frame} out of range: scene {scene} ({self.camera}) has '
                             f'{n} annotations in {self.scene_camera_path(scene)} (image ids '
                             f'{", ".join(str(self.image_id(f)) for f in range(n))}; frame '
                             f'{frame} is image {image_id(frame, self.camera)})')

    def _camera_entry(self, scene: int, frame: int) -> dict:
        path, entries = self.scene_camera_path(scene), self._camera_entries(scene)
        key = str(self.image_id(frame))
        if key not in entries:
            raise DatasetFileError(path, f'no entry for image {key} (camera {self.camera}, '
                                         f'annotation {frame})')
        entry = entries[key]
        for field, size in (('cam_K', 9), ('cam_R_w2c', 9), ('cam_t_w2c', 3)):
            if field not in entry or np.asarray(entry[field]).size != size:
                raise DatasetFileError(path, f'image {key}: {field!r} missing or not {size} '
                                             f'numbers')
        return entry

    def trajectory(self, scene: int) -> SceneCameras:
        if scene not in self._cameras:
            poses = []
            for frame in range(self.num_frames(scene)):
                entry = self._camera_entry(scene, frame)
                pose = np.eye(4)
                pose[:3, :3] = np.asarray(entry['cam_R_w2c'], np.float64).reshape(3, 3)
                pose[:3, 3] = np.asarray(entry['cam_t_w2c'], np.float64).reshape(3) / 1000.0
                poses.append(pose)
            self._cameras[scene] = SceneCameras(np.stack(poses))
        return self._cameras[scene]

    def load_meta(self, scene: int, frame: int) -> FrameMeta:
        """Instances of ``scene_gt.json`` for the frame's image (in file order, duplicates kept),
        their poses model -> camera (float32, metres), ``cam_K`` and the camera's depth scale."""
        self._check_frame(scene, frame)
        if scene not in self._metas:
            self._metas[scene] = [self._read_meta(scene, f) for f in range(self.num_frames(scene))]
        return self._metas[scene][frame]

    def instances(self, scene: int, frame: int):
        """(obj ids 0-based (M,) int64, poses (M, 4, 4) float64 model -> camera in metres) of
        the frame's ``scene_gt.json`` entry, in file order (the API's ``get_model_poses``)."""
        path = self.frame_path(scene, 'meta', frame)
        gt, key = _load_json(path), str(self.image_id(frame))
        if key not in gt:
            raise DatasetFileError(path, f'no entry for image {key} (camera {self.camera}, '
                                         f'annotation {frame})')
        ids, poses = [], []
        for n, inst in enumerate(gt[key]):
            try:
                obj = int(inst['obj_id'])
                rot = np.asarray(inst['cam_R_m2c'], np.float64).reshape(3, 3)
                trans = np.asarray(inst['cam_t_m2c'], np.float64).reshape(3) / 1000.0
            except (KeyError, TypeError, ValueError) as exc:
                raise DatasetFileError(path, f'image {key} instance {n}: needs obj_id, 9 '
                                             f'cam_R_m2c and 3 cam_t_m2c numbers ({exc})') from exc
            if not 1 <= obj <= NUM_OBJECTS:
                raise DatasetFileError(path, f'image {key} instance {n}: obj_id {obj} outside '
                                             f'1..{NUM_OBJECTS}')
            ids.append(obj - 1)
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = rot, trans
            poses.append(pose)
        return np.asarray(ids, np.int64), np.asarray(poses, np.float64).reshape(-1, 4, 4)

    def load_object_poses(self, scene: int, frame: int) -> ObjectPoses:
        """The frame's ``scene_gt.json`` instances (float64 poses, no camera composition);
        they must be annotation 0's (collision arrays are matched by position)."""
        self._check_frame(scene, frame)
        ids, poses = self.instances(scene, frame)
        self.check_frame_objects(scene, ids, self.frame_path(scene, 'meta', frame))
        return ObjectPoses(ids, poses, None)

    def _read_meta(self, scene: int, frame: int) -> FrameMeta:
        ids, poses = self.instances(scene, frame)
        camera = self._camera_entry(scene, frame)
        return FrameMeta(poses=np.ascontiguousarray(poses[:, :3], np.float32),
                         object_ids=ids,
                         intrinsics=np.asarray(camera['cam_K'], np.float64).reshape(3, 3),
                         factor_depth=DEPTH_SCALE[self.camera])

    def scene_meta(self, scene: int) -> FrameMeta:
        """Annotation 0's meta: the instance list the collision arrays follow."""
        return self.load_meta(scene, 0)

    def scene_meta_path(self, scene: int) -> str:
        return self.frame_path(scene, 'meta', 0)

    def check_frame_objects(self, scene: int, object_ids: Sequence[int], meta_path: str) -> None:
        """Refuse a frame whose instances differ from annotation 0's (collision arrays and every
        per-instance lookup are matched by position) or from the collision file's count."""
        if scene not in self._instances:
            self._instances[scene] = tuple(int(o) for o in self.scene_meta(scene).object_ids)
            collision = self.collision_label_path(scene)
            if os.path.isfile(collision):
                with NpzArchive(collision) as npz:
                    self._collision_counts[scene] = len(npz.files)
        listed, ids = self._instances[scene], tuple(int(o) for o in object_ids)
        if ids != listed:
            raise DatasetFileError(meta_path, f'a frame of camera {self.camera} lists objects '
                                              f'{[o + 1 for o in ids]} (obj_id) but annotation 0 '
                                              f'of scene {scene} lists {[o + 1 for o in listed]}: '
                                              f'collision arrays are matched by position')
        count = self._collision_counts.get(scene)
        if count is not None and count != len(ids):
            raise DatasetFileError(self.collision_label_path(scene),
                                   f'has {count} arrays but {meta_path} lists {len(ids)} '
                                   f'instances of scene {scene}: every instance needs its '
                                   f'collision rows')

    def _load_png(self, path: str, channels: int) -> np.ndarray:
        require_file(path)
        image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if image is None:
            raise DatasetFileError(path, 'cannot decode PNG')
        if channels == 1 and image.ndim != 2:
            raise DatasetFileError(path, f'expected a single-channel image, got {image.shape}')
        if channels == 3 and (image.ndim != 3 or image.shape[2] < 3):
            raise DatasetFileError(path, f'expected a 3-channel image (the API reads channel '
                                         f'0), got shape {image.shape}')
        return image

    def load_depth(self, scene: int, frame: int) -> np.ndarray:
        """(H, W) uint16 raw depth; metres = value / DEPTH_SCALE[camera]."""
        self._check_frame(scene, frame)
        path = self.frame_path(scene, 'depth', frame)
        depth = self._load_png(path, 1)
        if depth.dtype != np.uint16:
            raise DatasetFileError(path, f'depth must be uint16, got {depth.dtype}')
        return depth

    def load_segmentation(self, scene: int, frame: int) -> np.ndarray:
        """(H, W) channel 0 of the label PNG: 0 background, obj_id = object id + 1."""
        self._check_frame(scene, frame)
        label = self._load_png(self.frame_path(scene, 'label', frame), 3)
        return np.ascontiguousarray(label[..., 0])

    def load_rgb(self, scene: int, frame: int) -> np.ndarray:
        """(H, W, 3) uint8 colour image of the frame's image id, RGB order."""
        self._check_frame(scene, frame)
        return read_rgb_png(self.frame_path(scene, 'rgb', frame))

    def visibility(self, scene: int, frame: int) -> np.ndarray:
        """(M,) visible share of each instance: pixel sum of ``mask_visib`` over that of
        ``mask`` (all channels, as loadGrasp sums them); NaN where the amodal mask is empty."""
        out = []
        for instance in range(len(self.load_meta(scene, frame).object_ids)):
            visible = self._load_png(self.mask_path(scene, frame, instance, True), 0)
            amodal = self._load_png(self.mask_path(scene, frame, instance, False), 0)
            total = float(np.sum(amodal, dtype=np.float64))
            out.append(np.sum(visible, dtype=np.float64) / total if total else np.nan)
        return np.asarray(out, np.float64)

    def visible_instances(self, scene: int, frame: int,
                          threshold: float = VISIBILITY_THRESHOLD) -> np.ndarray:
        """Positions of the instances loadGrasp keeps: visibility >= ``threshold`` (not NaN)."""
        vis = self.visibility(scene, frame)
        return np.flatnonzero(~(np.isnan(vis) | (vis < threshold)))

    # ---------------------------------------------------------------- labels
    def load_grasp_label(self, obj: int, grid: Optional[tuple] = None) -> Dict[str, np.ndarray]:
        """Points (Np,3), scores μ (Np,V,A,D), widths (Np,V,A,D) float32 and the self-collision
        mask (all False when the file has no ``collision`` array, as GraspClutter6D ships it:
        its collision labels hold every collision)."""
        path = self.grasp_label_path(obj)
        if not os.path.isfile(path):
            raise DatasetFileError(path, f'file not found: object {obj + 1} (obj_id) appears in '
                                         f'scene_gt.json but has no grasp labels')
        with NpzArchive(path) as npz:
            return grasp_label_arrays(npz, grid, collision_required=False)

    def load_collision(self, scene: int, meta: Optional[FrameMeta] = None,
                       num_points: Optional[Dict[int, int]] = None,
                       grid: Optional[tuple] = None) -> List[np.ndarray]:
        """One (Np, V, A, D) bool array per ``scene_gt`` instance (``arr_i``, in that order)."""
        with NpzArchive(self.collision_label_path(scene)) as npz:
            path, count = npz.path, len(npz.files)
            if meta is not None and count != len(meta.object_ids):
                raise DatasetFileError(path, f'has {count} arrays but scene_gt.json of scene '
                                             f'{scene} lists {len(meta.object_ids)} instances: '
                                             f'every instance needs its collision rows')
            masks = []
            for i in range(count):
                mask = check_array(path, f'arr_{i}', npz[f'arr_{i}'], 4, 'b')
                if grid is not None and tuple(mask.shape[1:]) != tuple(grid):
                    raise DatasetFileError(path, f"'arr_{i}' has grid {mask.shape[1:]}, expected "
                                                 f'{tuple(grid)}')
                if meta is not None and num_points is not None:
                    obj = int(meta.object_ids[i])
                    if mask.shape[0] != num_points[obj]:
                        raise DatasetFileError(
                            path, f"'arr_{i}' has {mask.shape[0]} rows but instance {i} is "
                                  f'obj_id {obj + 1} with {num_points[obj]} label points')
                masks.append(mask)
        return masks
