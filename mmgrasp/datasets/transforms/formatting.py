"""Packing a transformed frame into model inputs and a data sample."""
import dataclasses
from typing import Sequence

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from mmgrasp.datasets.transforms.augmentation import apply_matrix_to_poses
from mmgrasp.registry import TRANSFORMS
from mmgrasp.structures.data_sample import GraspDataSample

#: Results entries that are process-local or heavy and must never leave a loader worker.
UNPACKABLE = ('reader', 'rng')


@TRANSFORMS.register_module()
class PackGraspInputs(BaseTransform):
    """Turn the results dict into ``{'inputs': {...}, 'data_samples': GraspDataSample}``.

    Only the listed keys travel: the reader, the RNG, the full-resolution images and the
    per-object arrays of the results stay in the worker. Poses reach the model only inside the
    grasp labels; each label takes its pose from ``poses`` here, after augmentation.

    Required Keys:

    - points (np.float32, (N, 3))

    Optional Keys (packed when present):

    - the other ``keys`` (numpy arrays -> tensors, sharing memory)
    - voxel_size (float): adds ``inputs['coors']`` = points / voxel_size (float32), computed from
      the final cloud as GSNet does
    - grasp_labels (list[ObjectGraspLabels]), grasp_label_instances ((K,) int64) and
      poses ((M, 3, 4) float32): label k gets pose ``poses[grasp_label_instances[k]]``
    - grasp_label_visibility (PendingVisibility): packed as ``grasp_label_visibility``, for
      GraspDataPreprocessor to run the visible-label test on the batch's device
    - economic_labels (EconomicFrameLabels): packed with the poses of ``poses``; with
      aug_on_device turned by aug_matrix here (the worker's float32 arithmetic), as these
      labels stay on the host
    - aug_matrix ((3, 3) float32) with aug_on_device: packed as ``inputs['aug_matrix']``, for
      GraspDataPreprocessor to apply to the points and label poses of the batch
    - normal_matrix ((3, 3) float32) with aug_on_device: packed as ``inputs['normal_matrix']``
      (the normals' turn)
    - normal_rule (dict): put in the sample's metainfo, for GraspDataPreprocessor to compute
      the normals (``EstimateNormals(apply='device')``)
    - the ``meta_keys``

    Args:
        keys: results arrays packed into ``inputs``.
        meta_keys: results entries copied into the sample's metainfo.
    """

    def __init__(self, keys: Sequence[str] = ('points', 'objectness', 'graspness'),
                 meta_keys: Sequence[str] = ('scene', 'frame', 'camera', 'sample_idx', 'epoch')):
        unsafe = sorted(set(UNPACKABLE) & (set(keys) | set(meta_keys)))
        if unsafe:
            raise ValueError(f'PackGraspInputs: {unsafe} must not be packed (process-local)')
        self.keys = tuple(keys)
        self.meta_keys = tuple(meta_keys)

    def transform(self, results: dict) -> dict:
        inputs = {key: torch.from_numpy(np.ascontiguousarray(results[key]))
                  for key in self.keys if key in results}
        if results.get('aug_on_device'):
            if 'voxel_size' in results:
                raise ValueError("PackGraspInputs: voxel coordinates ('voxel_size') come from "
                                 "the final cloud, but RandomFlipRotateScene(apply='device') "
                                 'leaves the cloud unaugmented in the worker')
            inputs['aug_matrix'] = torch.from_numpy(results['aug_matrix'])
            if 'normal_matrix' in results:
                inputs['normal_matrix'] = torch.from_numpy(results['normal_matrix'])
        if 'voxel_size' in results:
            inputs['coors'] = torch.from_numpy(
                np.ascontiguousarray(results['points'], dtype=np.float32)
                / float(results['voxel_size']))

        sample = GraspDataSample(metainfo={k: results[k] for k in self.meta_keys if k in results})
        if 'normal_rule' in results:
            sample.set_metainfo(dict(normal_rule=dict(results['normal_rule'])))
        if 'grasp_labels' in results:
            labels = list(results['grasp_labels'])
            if 'grasp_label_instances' in results:
                poses, instances = results['poses'], results['grasp_label_instances']
                if len(instances) != len(labels):
                    raise ValueError(f'PackGraspInputs: {len(labels)} grasp_labels but '
                                     f'{len(instances)} grasp_label_instances')
                labels = [dataclasses.replace(label, pose=torch.from_numpy(
                              np.ascontiguousarray(poses[i], dtype=np.float32)))
                          for label, i in zip(labels, instances)]
            sample.grasp_labels = labels
            if 'grasp_label_visibility' in results:
                sample.grasp_label_visibility = results['grasp_label_visibility']
        if 'economic_labels' in results:  # poses after augmentation
            poses = np.ascontiguousarray(results['poses'], np.float32)
            if results.get('aug_on_device'):
                poses = apply_matrix_to_poses(results['aug_matrix'], poses)
            sample.economic_labels = dataclasses.replace(results['economic_labels'],
                                                         poses=torch.from_numpy(poses))
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(keys={self.keys}, meta_keys={self.meta_keys})'
