"""EconomicGrasp's labels of one frame, dense or deferred, and the one way to read their rows:
:func:`gather_economic_rows`.

A frame carries the kept label points of every instance of its scene (model frames, instance
after instance in meta order, as the reference dataset's ``pointid == i`` lists), their poses
and either the decoded per-row arrays of the whole scene (``dense``, the reference path: what
EconomicGrasp's dataset loads for every sample) or a record of where they live
(``deferred``): the model reads only the rows its seeds matched, in one pass per batch
(every distinct row once, in file order, from the memory maps), decoded on the host as the
dense path decodes, and sent to a CUDA device in one transfer (:func:`to_device_once`; that
branch runs only where CUDA is: its packing is tested on the CPU, the transfer itself is
unverified here).
"""
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from mmgrasp.storage.labels.economic import decode_scores, decode_widths

#: decoded per-row arrays: (P, K) int32 angle / depth class, float32 score / width, int64 view
#: id; (P, V) float32 view graspness
ROW_NAMES = ('rotations', 'depth', 'scores', 'widths', 'topview', 'vgraspness')


def decode_rows(stored: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Stored economic arrays -> what the reference dataset makes of them (``astype(int32)``,
    ``/ 10.``, ``/ 1000.``), plus int64 views for indexing."""
    return dict(rotations=stored['rotations'].astype(np.int32),
                depth=stored['depth'].astype(np.int32),
                scores=decode_scores(np.asarray(stored['scores'])),
                widths=decode_widths(np.asarray(stored['widths'])),
                topview=stored['topview'].astype(np.int64),
                vgraspness=np.asarray(stored['vgraspness'], np.float32))


@dataclass(frozen=True)
class EconomicRowsRecord:
    """Where a frame's economic rows live: a version folder of the asset and a scene (small
    and picklable: it is what a loader worker ships instead of the arrays)."""
    path: str
    scene: int

    def file(self, name: str) -> str:
        return f'{self.path}/scenes/{self.scene:04d}/{name}.npy'


@dataclass
class EconomicFrameLabels:
    """Economic labels of one frame.

    Attributes:
        points: (P, 3) float32 kept label points, model frames.
        point_instance: (P,) int64 instance (meta order) of each point.
        scene_row: (P,) int64 row of each point in the scene's files.
        poses: (O, 3, 4) float32 model -> camera, after augmentation.
        dense: the decoded :data:`ROW_NAMES` arrays of the whole scene (tensors), or None.
        deferred: the record that reads the rows later, or None.
    """
    points: Tensor
    point_instance: Tensor
    scene_row: Tensor
    poses: Tensor
    dense: Optional[Dict[str, Tensor]] = None
    deferred: Optional[EconomicRowsRecord] = None

    def __post_init__(self) -> None:
        if (self.dense is None) == (self.deferred is None):
            raise ValueError('EconomicFrameLabels needs either dense rows or a deferred record')

    def to(self, device) -> 'EconomicFrameLabels':
        """Move to ``device``; a deferred frame's ``scene_row`` stays where it is (on the host
        from the loader), since only the host-side row read uses it."""
        dense = None if self.dense is None else {k: v.to(device) for k, v in self.dense.items()}
        scene_row = self.scene_row if self.deferred is not None else self.scene_row.to(device)
        return EconomicFrameLabels(self.points.to(device), self.point_instance.to(device),
                                   scene_row, self.poses.to(device), dense, self.deferred)


_MAPS: Dict[str, np.ndarray] = {}


def _map(path: str) -> np.ndarray:
    if path not in _MAPS:
        if len(_MAPS) >= 512:
            _MAPS.pop(next(iter(_MAPS)))
        _MAPS[path] = np.load(path, mmap_mode='r')
    return _MAPS[path]


def read_rows(records: Sequence[EconomicRowsRecord], owner: np.ndarray, rows: np.ndarray
              ) -> Tuple[Dict[str, np.ndarray], int]:
    """Request k reads row ``rows[k]`` of ``records[owner[k]]``: every distinct (file, row) is
    read once, in file order, from the memory maps; returns the decoded arrays in request order
    and the bytes read."""
    files = [(r.path, r.scene) for r in records]
    keys = sorted(set(files))
    file_of = np.array([keys.index(f) for f in files], np.int64)[owner]
    order = np.lexsort((rows, file_of))
    stored, nbytes = {}, 0
    for name in ROW_NAMES:
        parts, where = [], []
        for f, (path, scene) in enumerate(keys):
            mine = order[file_of[order] == f]
            if not len(mine):
                continue
            wanted, inverse = np.unique(rows[mine], return_inverse=True)
            block = np.take(_map(EconomicRowsRecord(path, scene).file(name)), wanted, axis=0)
            nbytes += block.nbytes
            parts.append(block[inverse])
            where.append(mine)
        array = np.concatenate(parts)
        result = np.empty_like(array)
        result[np.concatenate(where)] = array
        stored[name] = result
    return decode_rows(stored), nbytes


def to_device_once(arrays: Dict[str, np.ndarray], device) -> Dict[str, Tensor]:
    """Copy the arrays to ``device`` in one transfer: their bytes packed into one buffer
    (widest dtype first, so every part stays aligned), split and viewed back there."""
    names = sorted(arrays, key=lambda k: -arrays[k].dtype.itemsize)
    flat = [np.ascontiguousarray(arrays[k]).reshape(-1).view(np.uint8) for k in names]
    buffer = torch.from_numpy(np.concatenate(flat)).to(device)
    out, start = {}, 0
    for name, part in zip(names, flat):
        dtype = getattr(torch, str(arrays[name].dtype))
        out[name] = buffer[start:start + len(part)].view(dtype).view(arrays[name].shape)
        start += len(part)
    return out


def gather_economic_rows(frames: Sequence[EconomicFrameLabels], frame: Tensor, point: Tensor,
                         device=None) -> Dict[str, Tensor]:
    """The decoded rows of label point ``point[k]`` of ``frames[frame[k]]``, for all requests
    of a batch at once (dense and deferred frames give the same tensors, bit for bit)."""
    device = device if device is not None else point.device
    if all(f.deferred is not None for f in frames):
        frame_np, point_np = torch.stack([frame, point]).cpu().numpy()  # one host read
        rows = np.concatenate([f.scene_row.cpu().numpy() for f in frames]) if frames else None
        offsets = np.cumsum([0] + [len(f.scene_row) for f in frames])
        scene_rows = rows[offsets[frame_np] + point_np]
        arrays, _ = read_rows([f.deferred for f in frames], frame_np, scene_rows)
        if torch.device(device).type == 'cpu':
            return {k: torch.from_numpy(v) for k, v in arrays.items()}
        return to_device_once(arrays, device)
    if any(f.deferred is not None for f in frames):
        raise ValueError('a batch mixes dense and deferred economic labels')
    out = {}
    for name in ROW_NAMES:
        parts = [f.dense[name][f.scene_row] for f in frames]
        stacked = torch.cat(parts)
        offsets = torch.tensor(np.cumsum([0] + [len(p) for p in parts])[:-1], device=frame.device)
        out[name] = stacked[offsets[frame] + point].to(device)
    return out
