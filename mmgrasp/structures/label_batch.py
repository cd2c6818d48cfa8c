"""GraspLabelBatch: every labelled object of every frame of a batch, stacked for the device."""
from dataclasses import dataclass
from typing import List, Tuple

from torch import Tensor

from .grasp_labels import ObjectGraspLabels


@dataclass
class GraspLabelBatch:
    """What label matching needs, in a few device tensors (built by GraspDataPreprocessor).

    Objects are listed frame by frame; ``objects[o]`` is the record that ``gather_grids`` reads
    for object o (dense grids already on the device; deferred records stay on the host).

    Attributes:
        objects: O records.
        points: (P, 3) float32 label points of all objects, model frames, object-major.
        point_object: (P,) int64 object index of each label point.
        point_row: (P,) int64 row of each label point within its object.
        poses: (O, 3, 4) float32 model -> camera transforms.
        object_frame: (O,) int64 frame index of each object.
        object_ids: (O,) int64 GraspNet object ids.
        num_frames: B.
        frame_points: (B,) label points of each frame, as host ints (frames are contiguous in
            ``points``), so that per-frame slices need no read of a device tensor; empty when
            unknown.
    """
    objects: List[ObjectGraspLabels]
    points: Tensor
    point_object: Tensor
    point_row: Tensor
    poses: Tensor
    object_frame: Tensor
    object_ids: Tensor
    num_frames: int
    frame_points: Tuple[int, ...] = ()

    @property
    def num_objects(self) -> int:
        return len(self.objects)

    def camera_points(self) -> Tensor:
        """(P, 3) label points in their frame's camera coordinates: R·p + t."""
        pose = self.poses[self.point_object]
        return (pose[:, :, :3] @ self.points.unsqueeze(-1)).squeeze(-1) + pose[:, :, 3]
