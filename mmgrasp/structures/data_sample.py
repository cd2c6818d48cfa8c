"""The data sample of one frame, as PackGraspInputs emits it and the models consume it."""
from typing import List

from mmengine.structures import BaseDataElement


class GraspDataSample(BaseDataElement):
    """Labels and meta information of one frame.

    Data fields:

    - ``grasp_labels`` (list[ObjectGraspLabels]): one record per labelled object, each with its
      label points, its (augmented) pose and its grids, dense or deferred.

    Meta fields (set by PackGraspInputs): ``scene``, ``frame``, ``camera``, ``sample_idx``,
    ``epoch``.

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
