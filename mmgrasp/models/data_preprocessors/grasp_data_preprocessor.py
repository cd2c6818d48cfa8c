"""GraspDataPreprocessor: stacks a packed batch and owns its move to the device."""
from typing import List, Optional, Sequence

import torch
from mmengine.model import BaseDataPreprocessor
from torch import Tensor

from mmgrasp.datasets.transforms.augmentation import apply_matrix, apply_matrix_to_poses
from mmgrasp.ops.point_normals import batch_normals
from mmgrasp.registry import MODELS
from mmgrasp.structures.grasp_labels import ObjectGraspLabels
from mmgrasp.structures.label_batch import GraspLabelBatch
from mmgrasp.structures.label_visibility import resolve_visibility


@MODELS.register_module()
class GraspDataPreprocessor(BaseDataPreprocessor):
    """Stack per-frame inputs into (B, N, ...) tensors and the labels of every object of every
    frame into a :class:`GraspLabelBatch`, moved in a few transfers (not one per object).

    Label points and poses travel as one float buffer, the index arrays as one integer buffer.
    Deferred grid records stay on the host (the assigner reads them after seed selection);
    dense grids, when present, are moved too — the reference path's cost.

    Batch augmentation: when the frames carry ``inputs['aug_matrix']``
    (``RandomFlipRotateScene(apply='device')``, drawn in the worker from the sample's stream),
    it is applied here, on the device, to the points and to the label poses of the batch
    (``GraspLabelBatch.poses``; the per-object records keep the worker's pose), with the
    worker's float32 arithmetic: the same values bit for bit as augmenting in the worker.
    Normals are turned by ``inputs['normal_matrix']`` (in the same product as the points).
    EconomicGrasp's and FineGrasp's label poses arrive turned (PackGraspInputs applies the
    matrix to them in the worker: they stay on the host, where the assigner reads them).

    Normals: when the samples carry ``metainfo['normal_rule']`` (``EstimateNormals(apply=
    'device')``), the normals of the batch are computed here by that rule from the
    camera-frame clouds, before the augmentation (:func:`mmgrasp.ops.point_normals.
    batch_normals`: one Triton launch on CUDA, the worker's function frame by frame on the
    CPU), bit for bit the worker's, and stored as ``inputs['normals']``.

    Visible labels: when the samples carry ``grasp_label_visibility``
    (``SampleGraspLabels(visible_test='device')``), the visible-label test of every object of
    the batch runs here, on the device, before the labels are stacked
    (:func:`mmgrasp.structures.label_visibility.resolve_visibility`: one host read of the
    masks, the draw on the host), and the stacked labels hold the kept rows: bit for bit the
    worker's test.

    Args:
        visible_kd_tree: how the visible-label test runs: None (a float64 brute-force pass on
            a CUDA device, the worker's cKDTree per object on the CPU, where the pass would
            cost the host seconds a batch), False (the pass on every device: what the launch
            counter counts as the CUDA path), True (the cKDTree on every device).
        **kwargs: ``BaseDataPreprocessor``'s.

    Inputs already on the device (moved ahead by :class:`~mmgrasp.engine.DevicePrefetcher`)
    are not copied again.

    Input: ``{'inputs': {key: [tensor per frame]}, 'data_samples': [GraspDataSample]}`` (what
    ``pseudo_collate`` makes of PackGraspInputs' output). Output: ``{'inputs': {key: (B, ...)
    tensor, 'grasp_labels': GraspLabelBatch}, 'data_samples': [...]}`` (no ``grasp_labels``
    when the samples carry none, e.g. at test time).
    """

    def __init__(self, visible_kd_tree: Optional[bool] = None, **kwargs):
        super().__init__(**kwargs)
        self.visible_kd_tree = visible_kd_tree

    def _move(self, tensor: Tensor) -> Tensor:
        if (tensor.device.type == self.device.type
                and self.device.index in (None, tensor.device.index)):
            return tensor  # already there (DevicePrefetcher)
        if self.device.type == 'cuda':
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def forward(self, data: dict, training: bool = False) -> dict:
        inputs = {key: self._move(torch.stack(list(values)))
                  for key, values in data['inputs'].items()}
        matrices = inputs.pop('aug_matrix', None)
        turns = inputs.pop('normal_matrix', None)
        samples = data.get('data_samples')
        rule = self.normal_rule(samples)
        if rule is not None:
            if 'normals' in inputs:
                raise ValueError("GraspDataPreprocessor: the batch carries 'normals' and a "
                                 "normal_rule; use one EstimateNormals step")
            inputs['normals'] = batch_normals(inputs['points'], **rule)
        if matrices is not None and 'normals' in inputs:
            if turns is None:
                raise ValueError("GraspDataPreprocessor: normals without "
                                 "inputs['normal_matrix'] in a batch augmented here")
            # points and normals in one product: (2, B, N, 3), contiguous halves
            both = apply_matrix(torch.stack([matrices, turns]),
                                torch.stack([inputs['points'], inputs['normals']]))
            inputs['points'], inputs['normals'] = both[0], both[1]
        elif matrices is not None:
            inputs['points'] = apply_matrix(matrices, inputs['points'])
        if samples and all('grasp_labels' in s for s in samples):
            inputs['grasp_labels'] = self.stack_labels(self.resolve_visibility(samples),
                                                       matrices)
        return {'inputs': inputs, 'data_samples': samples}

    def resolve_visibility(self, samples) -> List[List[ObjectGraspLabels]]:
        """Each sample's grasp labels after its pending visible-label test (all samples or
        none carry one). The samples are left as they came: a batch run twice is tested
        twice."""
        pending = ['grasp_label_visibility' in s for s in samples]
        if not any(pending):
            return [s.grasp_labels for s in samples]
        if not all(pending):
            raise ValueError('GraspDataPreprocessor: some samples of the batch carry a pending '
                             'visible-label test and some do not (one SampleGraspLabels '
                             'visible_test for the batch)')
        records = [s.grasp_label_visibility for s in samples]
        return resolve_visibility([s.grasp_labels for s in samples], records, self.device,
                                  self.visible_kd_tree)

    @staticmethod
    def normal_rule(samples) -> Optional[dict]:
        """The normals rule the samples ask for (one for the batch), or None."""
        rules = [s.metainfo.get('normal_rule') for s in samples or ()]
        if not any(rules):
            return None
        if any(r != rules[0] for r in rules):
            raise ValueError(f'GraspDataPreprocessor: the samples of a batch ask for different '
                             f'normal rules: {rules}')
        return rules[0]

    def stack_labels(self, frames: Sequence[List[ObjectGraspLabels]],
                     matrices: Optional[Tensor] = None) -> GraspLabelBatch:
        """Stack the labels of every frame; ``matrices`` ((B, 3, 3), on the device) are applied
        to the poses of each frame's objects."""
        objects = [label for frame in frames for label in frame]
        counts = torch.tensor([o.num_points for o in objects], dtype=torch.int64)
        object_frame = torch.cat([torch.full((len(f),), b, dtype=torch.int64)
                                  for b, f in enumerate(frames)]) if objects else \
            torch.zeros(0, dtype=torch.int64)
        object_ids = torch.tensor([o.object_id for o in objects], dtype=torch.int64)
        # sizes known on the host: no read of a tensor (a sync on the counted path)
        num_points = sum(o.num_points for o in objects)
        point_object = torch.repeat_interleave(torch.arange(len(objects)), counts,
                                               output_size=num_points)
        starts = torch.cumsum(counts, 0) - counts
        point_row = torch.arange(num_points) - starts[point_object]
        floats = torch.cat([torch.cat([o.points for o in objects]).reshape(-1) if objects
                            else torch.zeros(0),
                            torch.stack([o.pose for o in objects]).reshape(-1) if objects
                            else torch.zeros(0)])
        ints = torch.cat([point_object, point_row, object_frame, object_ids])
        floats, ints = self._move(floats), self._move(ints)
        P, O = num_points, len(objects)
        poses, object_frame = floats[3 * P:].view(O, 3, 4), ints[2 * P:2 * P + O]
        if matrices is not None:
            poses = apply_matrix_to_poses(matrices[object_frame], poses)
        moved = [self._move_grids(o) for o in objects]
        return GraspLabelBatch(
            objects=moved, points=floats[:3 * P].view(P, 3), poses=poses,
            point_object=ints[:P], point_row=ints[P:2 * P], object_frame=object_frame,
            object_ids=ints[2 * P + O:], num_frames=len(frames),
            frame_points=tuple(sum(o.num_points for o in f) for f in frames))

    def _move_grids(self, labels: ObjectGraspLabels) -> ObjectGraspLabels:
        """Dense grids go to the device; a deferred record (and the points, already stacked)
        stays where it is."""
        if labels.is_deferred or self.device.type == 'cpu':
            return labels
        return labels.to(self.device, non_blocking=True)
