"""Reader for the GraspNet-1Billion on-disk layout (real downloads and the synthetic writer's).

Only this module knows file names. Object ids are 0-based everywhere in mmgrasp, as in the label
file names; the segmentation PNG and ``meta['cls_indexes']`` store id + 1 and are converted here.
Every error names the file and what is wrong with it.
"""
import glob
import os
import zipfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np
import scipy.io

from mmgrasp.storage.source import CAMERAS, NUM_SCENES, DatasetFileError
from .model_files import read_annotation, read_ply_points

NUM_OBJECTS = 88
SPLITS = {
    'train': range(0, 100),
    'test': range(100, 190),
    'test_seen': range(100, 130),
    'test_similar': range(130, 160),
    'test_novel': range(160, 190),
}


@dataclass(frozen=True)
class FrameMeta:
    """What ``meta/%04d.mat`` says about one frame."""
    poses: np.ndarray  # (N, 3, 4) float32, model -> current camera
    object_ids: np.ndarray  # (N,) int64, 0-based, in the order of the collision arrays
    intrinsics: np.ndarray  # (3, 3) float64
    factor_depth: float


@dataclass(frozen=True)
class ObjectPoses:
    """A frame's objects posed as the reference label tools pose them (graspnetAPI's
    ``loadGrasp``, which HGGD's label converter calls)."""
    object_ids: np.ndarray  # (M,) int64, 0-based, in the order of the collision arrays
    poses: np.ndarray  # (M, 4, 4) model -> camera (GraspNet: the annotation XML's, float32)
    camera_pose: Optional[np.ndarray]  # (4, 4) the frame's camera relative to frame 0, which
    # loadGrasp composes with the poses and inverts again (GraspNet); None where it does not


@dataclass(frozen=True)
class CameraTrajectory:
    """Per scene and camera: intrinsics and where each frame's camera is relative to the table."""
    intrinsics: np.ndarray  # (3, 3) float64, camK.npy
    camera_poses: np.ndarray  # (F, 4, 4), frame i relative to frame 0
    cam0_wrt_table: np.ndarray  # (4, 4)

    def camera_to_table(self, frame: int) -> np.ndarray:
        """(4, 4) transform from frame ``frame``'s camera to the table frame."""
        return self.cam0_wrt_table @ self.camera_poses[frame]


def require_file(path: str) -> str:
    """``path``, or a DatasetFileError naming it when it is not a file."""
    if not os.path.isfile(path):
        raise DatasetFileError(path, 'file not found')
    return path


def check_array(path: str, key: str, array: np.ndarray, ndim: int,
                kind: str, shape_tail: Optional[tuple] = None) -> np.ndarray:
    """Check rank, dtype kind ('f' float, 'b' bool, 'iu' integer) and trailing shape."""
    if array.ndim != ndim:
        raise DatasetFileError(path, f'{key!r} has {array.ndim} dims {array.shape}, expected {ndim}')
    if array.dtype.kind not in kind:
        raise DatasetFileError(path, f'{key!r} has dtype {array.dtype}, expected kind {kind!r}')
    if shape_tail is not None and tuple(array.shape[-len(shape_tail):]) != tuple(shape_tail):
        raise DatasetFileError(
            path, f'{key!r} has shape {array.shape}, expected (..., {", ".join(map(str, shape_tail))})')
    return array


def read_rgb_png(path: str) -> np.ndarray:
    """(H, W, 3) uint8 image in RGB order from an 8-bit colour PNG (OpenCV decodes BGR; an
    alpha channel is dropped), or an error naming the file."""
    require_file(path)
    image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if image is None:
        raise DatasetFileError(path, 'cannot decode PNG')
    if image.ndim != 3 or image.shape[2] not in (3, 4) or image.dtype != np.uint8:
        raise DatasetFileError(path, f'expected an 8-bit colour image (3 or 4 channels), got '
                                     f'{image.dtype} of shape {image.shape}')
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB if image.shape[2] == 3 else cv2.COLOR_BGRA2RGB)


def _load_npy(path: str) -> np.ndarray:
    require_file(path)
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError/EOFError/OSError for broken files
        raise DatasetFileError(path, f'cannot read .npy ({exc})') from exc


class NpzArchive:
    """An npz opened with a clear error for a missing, truncated or corrupt file or member."""

    def __init__(self, path: str):
        self.path = require_file(path)
        try:
            self._npz = np.load(path, allow_pickle=False)
        except Exception as exc:
            raise DatasetFileError(path, f'cannot open npz ({exc})') from exc
        if not hasattr(self._npz, 'files'):
            raise DatasetFileError(path, 'is a .npy array, expected an npz archive')

    @property
    def files(self) -> List[str]:
        return self._npz.files

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._npz.files:
            raise DatasetFileError(self.path, f'missing array {key!r} (has {self._npz.files})')
        try:
            return self._npz[key]
        except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:
            raise DatasetFileError(self.path, f'array {key!r} is truncated or corrupt ({exc})') from exc

    def close(self) -> None:
        self._npz.close()

    def __enter__(self) -> 'NpzArchive':
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def grasp_label_arrays(npz: NpzArchive, grid: Optional[tuple] = None,
                       collision_required: bool = True) -> Dict[str, np.ndarray]:
    """Points (Np,3) f32, scores μ (Np,V,A,D) f32, widths (Np,V,A,D) f32 and the self-collision
    mask (Np,V,A,D) bool of one open label file, checked for consistent shapes. Without
    ``collision_required`` a file with no ``collision`` array has no self-collision."""
    path = npz.path
    points = check_array(path, 'points', npz['points'], 2, 'f', (3,))
    scores = check_array(path, 'scores', npz['scores'], 4, 'f')
    offsets = check_array(path, 'offsets', npz['offsets'], 5, 'f', (3,))
    collision = (check_array(path, 'collision', npz['collision'], 4, 'b')
                 if collision_required or 'collision' in npz.files
                 else np.zeros(scores.shape, bool))
    n = len(points)
    grid = tuple(grid) if grid is not None else tuple(scores.shape[1:])
    for key, array in (('scores', scores), ('offsets', offsets[..., 0]),
                       ('collision', collision)):
        if array.shape != (n, *grid):
            raise DatasetFileError(path, f'{key!r} has shape {array.shape}, expected '
                                         f'{(n, *grid)} for {n} points')
    return dict(points=points.astype(np.float32), scores=scores.astype(np.float32),
                widths=np.ascontiguousarray(offsets[..., 2], dtype=np.float32),
                self_collision=collision)


class DerivedLabelFiles:
    """The loaders of the files mmgrasp derives for any layout (tolerance radii, GSNet
    graspness) and of the model points, shared by the readers; they name them by
    ``tolerance_path``, ``graspness_path`` and ``model_points_path``."""

    def load_model_points(self, obj: int) -> np.ndarray:
        """(N, 3) float64 vertices of an object's model PLY, as open3d reads them."""
        path = require_file(self.model_points_path(obj))
        try:
            return read_ply_points(path)
        except ValueError as exc:
            raise DatasetFileError(path, str(exc).split(': ', 1)[-1]) from exc

    def load_tolerance(self, obj: int) -> Optional[np.ndarray]:
        """(Np, V, A, D) float32 tolerance radii, or None where no tolerance file was generated."""
        path = self.tolerance_path(obj)
        if not os.path.isfile(path):
            return None
        return check_array(path, 'tolerance', _load_npy(path), 4, 'f').astype(np.float32)

    def load_graspness(self, scene: int, frame: int) -> np.ndarray:
        """(N_masked,) float32 GSNet graspness of the masked points of one frame."""
        path = self.graspness_path(scene, frame)
        if not os.path.isfile(path):
            raise DatasetFileError(path, 'file not found; GSNet graspness labels are generated '
                                         f'with `python tools/data/generate_graspness.py '
                                         f'{self.root} --camera {self.camera}`')
        array = _load_npy(path)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        return check_array(path, 'graspness', array, 1, 'f').astype(np.float32)


class GraspNetReader(DerivedLabelFiles):
    """Paths and loaders for one GraspNet-1Billion root and camera.

    Args:
        root: the dataset root (holds ``scenes/``, ``grasp_label/``, ``collision_label/``).
        camera: ``'realsense'`` or ``'kinect'``.
        tolerance_dir: where ``%03d_tolerance.npy`` live; default ``<root>/tolerance``
            (the reference code keeps them beside itself, so point here to that folder).
        graspness_dir: where GSNet's ``scene_%04d/<camera>/%04d.npy`` live; default
            ``<root>/graspness``.
    """

    layout = 'graspnet'
    cameras = CAMERAS

    def __init__(self, root: str, camera: str = 'realsense', tolerance_dir: Optional[str] = None,
                 graspness_dir: Optional[str] = None):
        if camera not in CAMERAS:
            raise ValueError(f'camera={camera!r}: expected one of {CAMERAS}')
        if not os.path.isdir(os.path.join(root, 'scenes')):
            raise DatasetFileError(os.path.join(root, 'scenes'),
                                   'not a GraspNet-1Billion root: no scenes/ folder')
        self.root = os.path.abspath(root)
        self.camera = camera
        self.tolerance_dir = tolerance_dir or os.path.join(self.root, 'tolerance')
        self.graspness_dir = graspness_dir or os.path.join(self.root, 'graspness')
        self._trajectories: Dict[int, CameraTrajectory] = {}
        self._scene_objects: Dict[int, Tuple[int, ...]] = {}
        self._collision_counts: Dict[int, Optional[int]] = {}

    # ---------------------------------------------------------------- paths
    @staticmethod
    def check_scene(scene: int) -> int:
        if not 0 <= int(scene) < NUM_SCENES:
            raise ValueError(f'scene id {scene} out of range: GraspNet-1Billion has scenes '
                             f'0..{NUM_SCENES - 1}')
        return int(scene)

    @staticmethod
    def check_object(obj: int) -> int:
        if not 0 <= int(obj) < NUM_OBJECTS:
            raise ValueError(f'object id {obj} out of range 0..{NUM_OBJECTS - 1}')
        return int(obj)

    def scene_dir(self, scene: int) -> str:
        return os.path.join(self.root, 'scenes', f'scene_{self.check_scene(scene):04d}')

    def camera_dir(self, scene: int) -> str:
        return os.path.join(self.scene_dir(scene), self.camera)

    def frame_path(self, scene: int, kind: str, frame: int) -> str:
        """``kind`` in depth/label/rgb (PNG) or meta (MAT)."""
        ext = 'mat' if kind == 'meta' else 'png'
        return os.path.join(self.camera_dir(scene), kind, f'{frame:04d}.{ext}')

    def grasp_label_path(self, obj: int) -> str:
        return os.path.join(self.root, 'grasp_label', f'{self.check_object(obj):03d}_labels.npz')

    def collision_label_path(self, scene: int) -> str:
        return os.path.join(self.root, 'collision_label', f'scene_{self.check_scene(scene):04d}',
                            'collision_labels.npz')

    def tolerance_path(self, obj: int) -> str:
        return os.path.join(self.tolerance_dir, f'{self.check_object(obj):03d}_tolerance.npy')

    def graspness_path(self, scene: int, frame: int) -> str:
        return os.path.join(self.graspness_dir, f'scene_{self.check_scene(scene):04d}',
                            self.camera, f'{frame:04d}.npy')

    def model_points_path(self, obj: int) -> str:
        return os.path.join(self.root, 'models', f'{self.check_object(obj):03d}',
                            'nontextured.ply')

    def annotation_path(self, scene: int, frame: int) -> str:
        return os.path.join(self.camera_dir(scene), 'annotations', f'{frame:04d}.xml')

    # ---------------------------------------------------------------- scenes and frames
    def scene_ids(self, split: str) -> List[int]:
        """Scenes of ``split`` present on disk (a subset of the split's official range)."""
        if split not in SPLITS:
            raise ValueError(f'split={split!r}: expected one of {list(SPLITS)}')
        present = [s for s in SPLITS[split] if os.path.isdir(self.camera_dir(s))]
        if not present:
            raise DatasetFileError(os.path.join(self.root, 'scenes'),
                                   f'no scene of split {split!r} ({SPLITS[split].start}..'
                                   f'{SPLITS[split].stop - 1}) has a {self.camera}/ folder')
        return present

    def present_scenes(self) -> List[int]:
        """Scenes (any split) with a folder of the reader's camera."""
        return [s for s in range(NUM_SCENES) if os.path.isdir(self.camera_dir(s))]

    def collision_scenes(self) -> List[int]:
        """Scenes with a collision label file (the label store's scenes)."""
        found = glob.glob(os.path.join(self.root, 'collision_label', 'scene_*',
                                       'collision_labels.npz'))
        return sorted(int(os.path.basename(os.path.dirname(p))[len('scene_'):]) for p in found)

    def scene_meta_path(self, scene: int) -> str:
        """Frame 0's meta of the first camera present: the collision arrays follow its
        cls_indexes."""
        for camera in CAMERAS:
            path = os.path.join(self.scene_dir(scene), camera, 'meta', '0000.mat')
            if os.path.isfile(path):
                return path
        raise DatasetFileError(os.path.join(self.scene_dir(scene), '<camera>', 'meta', '0000.mat'),
                               'file not found: the collision arrays of the scene need its '
                               'cls_indexes')

    def scene_meta(self, scene: int) -> FrameMeta:
        """The meta whose instance list the scene's collision arrays follow."""
        return self.load_meta_file(self.scene_meta_path(scene))

    def scene_source_files(self, scene: int) -> List[str]:
        """The files the label store's rows of a scene come from."""
        return [self.collision_label_path(scene), self.scene_meta_path(scene),
                os.path.join(self.scene_dir(scene), 'object_id_list.txt')]

    def trajectory_files(self, scene: int) -> List[str]:
        """Per-scene files the frame store's frames depend on besides their own."""
        return [os.path.join(self.camera_dir(scene), name)
                for name in ('camK.npy', 'camera_poses.npy', 'cam0_wrt_table.npy')]

    def num_frames(self, scene: int) -> int:
        return len(self.trajectory(scene).camera_poses)

    def scene_object_ids(self, scene: int) -> np.ndarray:
        """0-based object ids listed in ``object_id_list.txt``."""
        path = require_file(os.path.join(self.scene_dir(scene), 'object_id_list.txt'))
        try:
            ids = np.loadtxt(path, dtype=np.int64, ndmin=1)
        except ValueError as exc:
            raise DatasetFileError(path, f'expected one integer object id per line ({exc})') from exc
        return ids

    def check_frame_objects(self, scene: int, object_ids: Sequence[int], meta_path: str) -> None:
        """Refuse a frame whose meta lists other objects, or the same in another order, than
        its scene's ``object_id_list.txt`` and collision file: collision arrays (and every
        per-instance lookup) are matched to a frame's objects by position. Cheap: the scene's
        list and array count are read once per reader."""
        if scene not in self._scene_objects:
            self._scene_objects[scene] = tuple(int(o) for o in self.scene_object_ids(scene))
            collision = self.collision_label_path(scene)
            if os.path.isfile(collision):
                with NpzArchive(collision) as npz:
                    self._collision_counts[scene] = len(npz.files)
        listed, ids = self._scene_objects[scene], tuple(int(o) for o in object_ids)
        if ids != listed:
            raise DatasetFileError(meta_path, f'cls_indexes list objects {list(ids)} (0-based) '
                                              f'but object_id_list.txt of scene {scene} lists '
                                              f'{list(listed)}: collision arrays are matched '
                                              f'to objects by position, so they must agree')
        count = self._collision_counts.get(scene)
        if count is not None and count != len(ids):
            raise DatasetFileError(meta_path, f'lists {len(ids)} objects but '
                                              f'{self.collision_label_path(scene)} has {count} '
                                              f'arrays (one per object of object_id_list.txt)')

    def trajectory(self, scene: int) -> CameraTrajectory:
        if scene not in self._trajectories:
            cam = self.camera_dir(scene)
            intrinsics = _load_npy(os.path.join(cam, 'camK.npy'))
            poses = _load_npy(os.path.join(cam, 'camera_poses.npy'))
            cam0 = _load_npy(os.path.join(cam, 'cam0_wrt_table.npy'))
            check_array(os.path.join(cam, 'camK.npy'), 'camK', intrinsics, 2, 'f', (3, 3))
            check_array(os.path.join(cam, 'camera_poses.npy'), 'camera_poses', poses, 3, 'f',
                         (4, 4))
            check_array(os.path.join(cam, 'cam0_wrt_table.npy'), 'cam0_wrt_table', cam0, 2, 'f',
                         (4, 4))
            self._trajectories[scene] = CameraTrajectory(intrinsics, poses, cam0)
        return self._trajectories[scene]

    def _check_frame(self, scene: int, frame: int) -> None:
        n = self.num_frames(scene)
        if not 0 <= frame < n:
            raise ValueError(f'frame {frame} out of range: scene {scene} ({self.camera}) has '
                             f'{n} frames')

    def load_meta(self, scene: int, frame: int) -> FrameMeta:
        self._check_frame(scene, frame)
        return self.load_meta_file(self.frame_path(scene, 'meta', frame))

    def load_object_poses(self, scene: int, frame: int) -> ObjectPoses:
        """The frame's objects from its annotation XML (float32 poses through Euler angles, as
        graspnetAPI builds them) and the frame's camera pose; the objects must be the scene's
        (collision arrays are matched by position)."""
        self._check_frame(scene, frame)
        path = require_file(self.annotation_path(scene, frame))
        try:
            objects = read_annotation(path)
        except ValueError as exc:
            raise DatasetFileError(path, str(exc).split(': ', 1)[-1]) from exc
        ids = np.asarray([obj for obj, _ in objects], np.int64)
        self.check_frame_objects(scene, ids, path)
        poses = np.asarray([pose for _, pose in objects], np.float32).reshape(-1, 4, 4)
        return ObjectPoses(ids, poses, self.trajectory(scene).camera_poses[frame])

    @staticmethod
    def load_meta_file(path: str) -> FrameMeta:
        require_file(path)
        try:
            mat = scipy.io.loadmat(path)
        except Exception as exc:
            raise DatasetFileError(path, f'cannot read .mat ({exc})') from exc
        for key in ('poses', 'cls_indexes', 'intrinsic_matrix', 'factor_depth'):
            if key not in mat:
                raise DatasetFileError(path, f'missing {key!r}')
        cls = np.asarray(mat['cls_indexes']).reshape(-1).astype(np.int64)
        poses = np.asarray(mat['poses'], dtype=np.float32)
        if poses.ndim == 2:  # a single object: savemat drops the trailing axis
            poses = poses[:, :, None]
        if poses.shape[:2] != (3, 4) or poses.shape[2] != len(cls):
            raise DatasetFileError(path, f"'poses' has shape {poses.shape}, expected (3, 4, "
                                         f"{len(cls)}) for {len(cls)} cls_indexes")
        if len(cls) and (cls.min() < 1 or cls.max() > NUM_OBJECTS):
            raise DatasetFileError(path, f"'cls_indexes' must be 1-based ids in 1..{NUM_OBJECTS}, "
                                         f'got {cls.tolist()}')
        return FrameMeta(poses=np.ascontiguousarray(poses.transpose(2, 0, 1)),
                         object_ids=cls - 1,
                         intrinsics=np.asarray(mat['intrinsic_matrix'], dtype=np.float64),
                         factor_depth=float(np.asarray(mat['factor_depth']).reshape(-1)[0]))

    def _load_png(self, path: str) -> np.ndarray:
        require_file(path)
        image = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if image is None:
            raise DatasetFileError(path, 'cannot decode PNG')
        if image.ndim != 2:
            raise DatasetFileError(path, f'expected a single-channel image, got shape {image.shape}')
        return image

    def load_depth(self, scene: int, frame: int) -> np.ndarray:
        """(H, W) uint16 raw depth; metres = value / factor_depth."""
        self._check_frame(scene, frame)
        path = self.frame_path(scene, 'depth', frame)
        depth = self._load_png(path)
        if depth.dtype != np.uint16:
            raise DatasetFileError(path, f'depth must be uint16, got {depth.dtype}')
        return depth

    def load_segmentation(self, scene: int, frame: int) -> np.ndarray:
        """(H, W) segmentation: 0 background, k = object id + 1."""
        self._check_frame(scene, frame)
        return self._load_png(self.frame_path(scene, 'label', frame))

    def load_rgb(self, scene: int, frame: int) -> np.ndarray:
        """(H, W, 3) uint8 colour image, RGB order."""
        self._check_frame(scene, frame)
        return read_rgb_png(self.frame_path(scene, 'rgb', frame))

    # ---------------------------------------------------------------- labels
    def open_grasp_label(self, obj: int) -> NpzArchive:
        return NpzArchive(self.grasp_label_path(obj))

    def load_grasp_label(self, obj: int, grid: Optional[tuple] = None) -> Dict[str, np.ndarray]:
        """One object's label arrays (see :func:`grasp_label_arrays`)."""
        with self.open_grasp_label(obj) as npz:
            return grasp_label_arrays(npz, grid)

    def load_collision(self, scene: int, meta: Optional[FrameMeta] = None,
                       num_points: Optional[Dict[int, int]] = None,
                       grid: Optional[tuple] = None) -> List[np.ndarray]:
        """Scene-collision masks, one (Np, V, A, D) bool array per object of ``cls_indexes``.

        With ``meta`` (any frame of the scene) and ``num_points`` (label points per object id),
        checks that the file has one array per listed object and that each matches its object's
        label points.
        """
        with NpzArchive(self.collision_label_path(scene)) as npz:
            path = npz.path
            count = len(npz.files)
            if meta is not None and count != len(meta.object_ids):
                raise DatasetFileError(path, f'has {count} arrays but meta cls_indexes of scene '
                                             f'{scene} list {len(meta.object_ids)} objects')
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
                            path, f"'arr_{i}' has {mask.shape[0]} rows but object {obj} (cls_index "
                                  f'{obj + 1}, position {i} in meta) has {num_points[obj]} label '
                                  f'points: cls_indexes disagree with the collision file')
                masks.append(mask)
        return masks
