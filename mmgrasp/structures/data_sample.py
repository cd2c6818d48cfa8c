"""The data sample of one frame, as PackGraspInputs emits it and the models consume it."""
from typing import List

from mmengine.structures import BaseDataElement


class GraspDataSample(BaseDataElement):
    """Labels and meta information of one frame.

    Data fields:

    - ``grasp_labels`` (list[ObjectGraspLabels]): one record per labelled object, each with its
      label points, its (augmented) pose and its grids, dense or deferred.
    - ``hggd_grasps`` (dict[str, Tensor]): HGGD's per-image grasp record of the frame, a tensor
      per field (``mmgrasp.datasets.transforms.hggd.GRASP_FIELDS``).
    - ``hggd_rects`` (dict[str, Tensor]): the rectangles HGGD's 2-D targets are rendered from
      (``LoadHGGDGrasps``).

    Meta fields (set by PackGraspInputs): ``scene``, ``frame``, ``camera``, ``sample_idx``,
    ``epoch``; PackHGGDInputs adds ``factor_depth`` and ``hggd_max_events``.

    ``to()`` does not move tensors inside lists: GraspDataPreprocessor moves the labels itself.
    """

    @property
    def grasp_labels(self) -> List:
        return self._grasp_labels

    @grasp_labels.setter
    def grasp_labels(self, value: List) -> None:
        self.set_field(value, '_grasp_labels', dtype=list)

    @grasp_labels.deleter
    def grasp_labels(self) -> None:
        del self._grasp_labels
