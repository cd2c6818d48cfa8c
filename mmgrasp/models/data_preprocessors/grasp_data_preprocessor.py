"""GraspDataPreprocessor: stacks a packed batch and owns its move to the device."""
from typing import List, Optional, Sequence

import torch
from mmengine.model import BaseDataPreprocessor
from torch import Tensor

from mmgrasp.registry import MODELS
from mmgrasp.structures.grasp_labels import ObjectGraspLabels
from mmgrasp.structures.label_batch import GraspLabelBatch


@MODELS.register_module()
class GraspDataPreprocessor(BaseDataPreprocessor):
    """Stack per-frame inputs into (B, N, ...) tensors and the labels of every object of every
    frame into a :class:`GraspLabelBatch`, moved in a few transfers (not one per object).

    Label points and poses travel as one float buffer, the index arrays as one integer buffer.
    Deferred grid records stay on the host (the assigner reads them after seed selection);
    dense grids, when present, are moved too — the reference path's cost.

    Input: ``{'inputs': {key: [tensor per frame]}, 'data_samples': [GraspDataSample]}`` (what
    ``pseudo_collate`` makes of PackGraspInputs' output). Output: ``{'inputs': {key: (B, ...)
    tensor, 'grasp_labels': GraspLabelBatch}, 'data_samples': [...]}`` (no ``grasp_labels``
    when the samples carry none, e.g. at test time).
    """

    def _move(self, tensor: Tensor) -> Tensor:
        if self.device.type == 'cuda':
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def forward(self, data: dict, training: bool = False) -> dict:
        inputs = {key: self._move(torch.stack(list(values)))
                  for key, values in data['inputs'].items()}
        samples = data.get('data_samples')
        if samples and all('grasp_labels' in s for s in samples):
            inputs['grasp_labels'] = self.stack_labels([s.grasp_labels for s in samples])
        return {'inputs': inputs, 'data_samples': samples}

    def stack_labels(self, frames: Sequence[List[ObjectGraspLabels]]) -> GraspLabelBatch:
        objects = [label for frame in frames for label in frame]
        counts = torch.tensor([o.num_points for o in objects], dtype=torch.int64)
        object_frame = torch.cat([torch.full((len(f),), b, dtype=torch.int64)
                                  for b, f in enumerate(frames)]) if objects else \
            torch.zeros(0, dtype=torch.int64)
        object_ids = torch.tensor([o.object_id for o in objects], dtype=torch.int64)
        num_points = int(counts.sum())
        point_object = torch.repeat_interleave(torch.arange(len(objects)), counts)
        starts = torch.cumsum(counts, 0) - counts
        point_row = torch.arange(num_points) - starts[point_object]
        floats = torch.cat([torch.cat([o.points for o in objects]).reshape(-1) if objects
                            else torch.zeros(0),
                            torch.stack([o.pose for o in objects]).reshape(-1) if objects
                            else torch.zeros(0)])
        ints = torch.cat([point_object, point_row, object_frame, object_ids])
        floats, ints = self._move(floats), self._move(ints)
        P, O = num_points, len(objects)
        moved = [self._move_grids(o) for o in objects]
        return GraspLabelBatch(
            objects=moved, points=floats[:3 * P].view(P, 3),
            poses=floats[3 * P:].view(O, 3, 4), point_object=ints[:P], point_row=ints[P:2 * P],
            object_frame=ints[2 * P:2 * P + O], object_ids=ints[2 * P + O:],
            num_frames=len(frames))

    def _move_grids(self, labels: ObjectGraspLabels) -> ObjectGraspLabels:
        """Dense grids go to the device; a deferred record (and the points, already stacked)
        stays where it is."""
        if labels.is_deferred or self.device.type == 'cpu':
            return labels
        return labels.to(self.device, non_blocking=True)
