"""What the stores need from the raw dataset they are built from.

The stores do not import the dataset reader (``mmgrasp.datasets.GraspNetReader``): storage sits
below datasets. A builder is handed a reader, and this module says what it must offer
(:class:`GraspSource`), together with the facts of the on-disk layout the stores rely on and the
error for a bad source file, which the reader raises too.
"""
from typing import Dict, List, Optional, Protocol, Sequence

import numpy as np

CAMERAS = ('realsense', 'kinect')
NUM_SCENES = 190


class DatasetFileError(ValueError):
    """A dataset file is missing, unreadable or holds the wrong arrays."""

    def __init__(self, path: str, problem: str):
        super().__init__(f'{path}: {problem}')
        self.path, self.problem = path, problem

    def __reduce__(self):  # raised in a build process, re-raised in the one that waits for it
        return type(self), (self.path, self.problem), self.__dict__


class GraspSource(Protocol):
    """The paths and loaders of one dataset root that building a store uses
    (``mmgrasp.datasets.GraspNetReader`` and ``GraspClutter6DReader`` implement it)."""

    root: str
    camera: str
    tolerance_dir: str
    graspness_dir: str

    def scene_dir(self, scene: int) -> str: ...

    def camera_dir(self, scene: int) -> str: ...

    def frame_path(self, scene: int, kind: str, frame: int) -> str: ...

    def grasp_label_path(self, obj: int) -> str: ...

    def collision_label_path(self, scene: int) -> str: ...

    def tolerance_path(self, obj: int) -> str: ...

    def graspness_path(self, scene: int, frame: int) -> str: ...

    layout: str  # 'graspnet' or 'graspclutter6d'

    def present_scenes(self) -> List[int]: ...

    def collision_scenes(self) -> List[int]: ...

    def scene_meta_path(self, scene: int) -> str: ...

    def scene_meta(self, scene: int): ...

    def scene_source_files(self, scene: int) -> List[str]: ...

    def trajectory_files(self, scene: int) -> List[str]: ...

    def num_frames(self, scene: int) -> int: ...

    def check_frame_objects(self, scene: int, object_ids: Sequence[int],
                            meta_path: str) -> None: ...

    def trajectory(self, scene: int): ...

    def load_meta(self, scene: int, frame: int): ...

    def load_depth(self, scene: int, frame: int) -> np.ndarray: ...

    def load_rgb(self, scene: int, frame: int) -> np.ndarray: ...

    def load_segmentation(self, scene: int, frame: int) -> np.ndarray: ...

    def load_grasp_label(self, obj: int, grid: Optional[tuple] = None
                         ) -> Dict[str, np.ndarray]: ...

    def load_collision(self, scene: int, meta=None, num_points: Optional[Dict[int, int]] = None,
                       grid: Optional[tuple] = None): ...

    def load_tolerance(self, obj: int) -> Optional[np.ndarray]: ...

    def load_graspness(self, scene: int, frame: int) -> np.ndarray: ...

    def load_object_poses(self, scene: int, frame: int): ...

    def load_model_points(self, obj: int) -> np.ndarray: ...
