"""Packing a transformed frame into model inputs and a data sample."""
import dataclasses
from typing import List, Sequence

import numpy as np
import torch
from mmcv.transforms import BaseTransform
from torch.utils.data import get_worker_info

from mmgrasp.datasets.transforms.augmentation import apply_matrix_to_poses
from mmgrasp.registry import TRANSFORMS
from mmgrasp.structures.data_sample import GraspDataSample

#: Results entries that are process-local or heavy and must never leave a loader worker.
UNPACKABLE = ('reader', 'rng')


class OneBuffer:
    """Arrays copied into one CPU buffer and handed out as tensors viewing it (same dtypes,
    shapes and values, C order).

    A batch leaving a loader worker moves each tensor storage into shared memory and hands
    its file descriptor to the main process one storage at a time (torch.multiprocessing):
    with one storage a sample instead of one a tensor (22 for GSNet's recipe on a frame of
    9 objects) that is paid once a sample. In a worker the buffer is made in shared memory
    at once, as ``default_collate`` does, so sending it copies nothing.
    """
    ALIGN = 64  # bytes: every view starts aligned for any dtype and vector loads

    def __init__(self):
        self._arrays = []

    def add(self, array: np.ndarray) -> int:
        """Queue ``array``; its tensor is ``tensors()[returned index]``."""
        self._arrays.append(np.asarray(array))
        return len(self._arrays) - 1

    def tensors(self) -> List[torch.Tensor]:
        starts, end = [], 0
        for array in self._arrays:
            starts.append(end)
            end += -(-array.nbytes // self.ALIGN) * self.ALIGN
        in_worker = end and get_worker_info() is not None
        storage = (torch.UntypedStorage._new_shared(end) if in_worker
                   else torch.UntypedStorage(end))
        host, out = torch.empty(0, dtype=torch.uint8).set_(storage).numpy(), []
        for array, start in zip(self._arrays, starts):
            np.copyto(host[start:start + array.nbytes].view(array.dtype).reshape(array.shape),
                      array, casting='no')
            out.append(torch.empty(0, dtype=_torch_dtype(array.dtype)).set_(
                storage, start // array.itemsize, array.shape))
        return out


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    if dtype not in _TORCH_DTYPES:
        _TORCH_DTYPES[dtype] = torch.from_numpy(np.empty(0, dtype)).dtype
    return _TORCH_DTYPES[dtype]


_TORCH_DTYPES: dict = {}


@TRANSFORMS.register_module()
class PackGraspInputs(BaseTransform):
    """Turn the results dict into ``{'inputs': {...}, 'data_samples': GraspDataSample}``.

    Only the listed keys travel: the reader, the RNG, the full-resolution images and the
    per-object arrays of the results stay in the worker. Poses reach the model only inside the
    grasp labels; each label takes its pose from ``poses`` here, after augmentation.

    Every tensor packed here (inputs, label points and poses, the pending visibility buffers,
    the economic labels' arrays; not dense grids) views one buffer a sample
    (:class:`OneBuffer`), so the sample leaves a loader worker as one shared-memory segment.

    Required Keys:

    - points (np.float32, (N, 3))

    Optional Keys (packed when present):

    - the other ``keys`` (numpy arrays -> tensors)
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
        buffer = OneBuffer()
        inputs = {key: buffer.add(results[key]) for key in self.keys if key in results}
        if results.get('aug_on_device'):
            if 'voxel_size' in results:
                raise ValueError("PackGraspInputs: voxel coordinates ('voxel_size') come from "
                                 "the final cloud, but RandomFlipRotateScene(apply='device') "
                                 'leaves the cloud unaugmented in the worker')
            inputs['aug_matrix'] = buffer.add(results['aug_matrix'])
            if 'normal_matrix' in results:
                inputs['normal_matrix'] = buffer.add(results['normal_matrix'])
        if 'voxel_size' in results:
            inputs['coors'] = buffer.add(
                np.asarray(results['points'], dtype=np.float32) / float(results['voxel_size']))

        labels, label_arrays = [], []
        if 'grasp_labels' in results:
            labels = list(results['grasp_labels'])
            if 'grasp_label_instances' in results:
                poses, instances = results['poses'], results['grasp_label_instances']
                if len(instances) != len(labels):
                    raise ValueError(f'PackGraspInputs: {len(labels)} grasp_labels but '
                                     f'{len(instances)} grasp_label_instances')
                label_arrays = [dict(points=buffer.add(label.points.numpy()),
                                     pose=buffer.add(np.asarray(poses[i], dtype=np.float32)))
                                for label, i in zip(labels, instances)]
        visibility = (results.get('grasp_label_visibility') if 'grasp_labels' in results
                      else None)
        if visibility is not None:
            visibility_arrays = dict(label_points=buffer.add(visibility.label_points.numpy()),
                                     scene_points=buffer.add(visibility.scene_points.numpy()))
        economic = results.get('economic_labels')
        if economic is not None:  # poses after augmentation
            poses = np.ascontiguousarray(results['poses'], np.float32)
            if results.get('aug_on_device'):
                poses = apply_matrix_to_poses(results['aug_matrix'], poses)
            economic_arrays = dict(points=buffer.add(economic.points.numpy()),
                                   point_instance=buffer.add(economic.point_instance.numpy()),
                                   scene_row=buffer.add(economic.scene_row.numpy()),
                                   poses=buffer.add(poses))

        tensors = buffer.tensors()
        inputs = {key: tensors[i] for key, i in inputs.items()}
        sample = GraspDataSample(metainfo={k: results[k] for k in self.meta_keys if k in results})
        if 'normal_rule' in results:
            sample.set_metainfo(dict(normal_rule=dict(results['normal_rule'])))
        if 'grasp_labels' in results:
            if label_arrays:
                labels = [dataclasses.replace(label, **{k: tensors[i] for k, i in arrays.items()})
                          for label, arrays in zip(labels, label_arrays)]
            sample.grasp_labels = labels
            if visibility is not None:
                sample.grasp_label_visibility = dataclasses.replace(
                    visibility, **{k: tensors[i] for k, i in visibility_arrays.items()})
        if economic is not None:
            sample.economic_labels = dataclasses.replace(
                economic, **{k: tensors[i] for k, i in economic_arrays.items()})
        return {'inputs': inputs, 'data_samples': sample}

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(keys={self.keys}, meta_keys={self.meta_keys})'
