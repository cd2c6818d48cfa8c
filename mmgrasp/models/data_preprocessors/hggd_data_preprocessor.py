"""HGGDDataPreprocessor: HGGD's image inputs and 2-D targets, made on the device."""
import math
from typing import Dict, List, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmgrasp.models.utils.hggd_targets import (HEATMAP_RADIUS, render_anchor_maps,
                                               render_heatmap)
from mmgrasp.models.utils.pil_resample import resize_float, resize_uint8
from mmgrasp.registry import MODELS
from .grasp_data_preprocessor import GraspDataPreprocessor


@MODELS.register_module()
class HGGDDataPreprocessor(GraspDataPreprocessor):
    """Turn a batch of integer RGB-D frames (:class:`~mmgrasp.datasets.transforms.
    PackHGGDInputs`) into HGGD's inputs and targets, on the device, as THU-VCLab/HGGD's dataset
    and training script make them (``dataset/base_grasp_dataset.py``, ``dataset/utils.py``).

    Every image is x-major, the reference's transposed (W, H) layout. Output ``inputs``:

    - ``images`` (B, 4, W_in, H_in) float32: depth ``clip(d - mean(d), -1, 1)`` with ``d`` the
      depth in metres resized by Pillow's bicubic mode 'F' (the mean over every pixel, zeros
      included, in float64), then RGB resized by Pillow's 8-bit bicubic, / 255. Both resizes
      are :mod:`~mmgrasp.models.utils.pil_resample`: equal to PIL's ``Image.resize``.
    - ``depths`` (B, W, H) float32: the raw depth in millimetres.
    - ``points`` (B, N, 3) float32: the frame's drawn pixels (``point_pixels``) back-projected
      with the frame's intrinsics: ``z = d / 1000``, ``x = float32((u - cx) / fx) · z``.
    - ``xyz_maps`` (B, 3, W_in / ratio, H_in / ratio) float32: the depth sampled by
      ``F.interpolate(mode='nearest')`` (every 16th pixel at 1280 -> 80) and back-projected
      with the intrinsics scaled by ``W / (W_in / ratio)`` (``to_xyz_maps``).
    - ``intrinsics`` (B, 3, 3) float64.
    - ``grasps`` (list of B dicts of tensors): the grasp records, when the samples carry them.
    - ``targets`` (training, when the samples carry rectangles): ``loc_map`` (B, 1, W_in, H_in)
      and ``cls_mask``, ``theta_offset``, ``depth_offset``, ``width_offset`` (B, anchor_k,
      W_in / ratio, H_in / ratio), float32 (:mod:`~mmgrasp.models.utils.hggd_targets`).

    Depth in millimetres is the raw depth × 1000 / ``factor_depth`` (one factor a batch; for
    GraspNet-1Billion's 1000 the raw values themselves).

    Args:
        input_size: (W_in, H_in) the network's input, (640, 360).
        ratio: anchor cell size in input pixels (8).
        anchor_k, anchor_w, anchor_z: θ anchors, width anchor (input px), depth anchor (mm).
        heatmap_radius: the Gaussian's radius (the reference's ``sigma=10``).
    """

    def __init__(self, input_size: Sequence[int] = (640, 360), ratio: int = 8,
                 anchor_k: int = 6, anchor_w: float = 50., anchor_z: float = 20.,
                 heatmap_radius: int = HEATMAP_RADIUS):
        super().__init__()
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.ratio = int(ratio)
        self.anchor_k = int(anchor_k)
        self.anchor_w = float(anchor_w)
        self.anchor_z = float(anchor_z)
        self.heatmap_radius = int(heatmap_radius)

    def forward(self, data: dict, training: bool = False) -> dict:
        samples = data['data_samples']
        raw = {key: self._move(torch.stack(list(values)))
               for key, values in data['inputs'].items()}
        depth = raw['depth'].float()
        scale = 1000. / _one_factor(samples)
        if scale != 1.:
            depth = depth * scale
        intrinsics, depths = raw['intrinsics'], depth.transpose(1, 2).contiguous()
        inputs = dict(images=self.images(raw['rgb'], depth), depths=depths,
                      points=self.points(depth, raw['point_pixels'], intrinsics),
                      xyz_maps=self.xyz_maps(depths, intrinsics), intrinsics=intrinsics)
        tables = {}
        if all('hggd_grasps' in s for s in samples):
            tables['grasps'] = [s.hggd_grasps for s in samples]
        if training and all('hggd_rects' in s for s in samples):
            tables['rects'] = [{k: v for k, v in s.hggd_rects.items() if k != 'heat_centers'}
                               for s in samples]
            tables['heat'] = [{'centers': s.hggd_rects['heat_centers']} for s in samples]
        columns, owners = self._move_tables(tables)
        if 'grasps' in tables:
            counts = [len(r['thetas_rad']) for r in tables['grasps']]
            parts = {k: v.split(counts) for k, v in columns['grasps'].items()}
            inputs['grasps'] = [{k: p[b] for k, p in parts.items()} for b in range(len(samples))]
        if 'rects' in tables:
            inputs['targets'] = self.targets(samples, inputs['depths'], columns, owners)
        return {'inputs': inputs, 'data_samples': samples}

    def images(self, rgb: Tensor, depth: Tensor) -> Tensor:
        """(B, 4, W_in, H_in): normalised resized depth and RGB / 255, x-major."""
        metres = resize_float(depth, self.input_size) / 1000.
        mean = metres.double().mean((1, 2), keepdim=True).float()
        normalised = torch.clamp(metres - mean, -1., 1.)
        colour = resize_uint8(rgb.permute(0, 3, 1, 2), self.input_size).float() / 255.
        return torch.cat([normalised[:, None], colour], 1).transpose(2, 3).contiguous()

    @staticmethod
    def points(depth: Tensor, pixels: Tensor, intrinsics: Tensor) -> Tensor:
        """(B, N, 3) cloud of the row-major ``pixels`` of ``depth`` (B, H, W) in mm."""
        width = depth.shape[2]
        z = depth.reshape(len(depth), -1).gather(1, pixels) / 1000.
        u, v = (pixels % width).double(), torch.div(pixels, width, rounding_mode='floor').double()
        ray_x = ((u - intrinsics[:, 0, 2:3]) / intrinsics[:, 0, 0:1]).float()
        ray_y = ((v - intrinsics[:, 1, 2:3]) / intrinsics[:, 1, 1:2]).float()
        return torch.stack([ray_x * z, ray_y * z, z], -1)

    def xyz_maps(self, depths: Tensor, intrinsics: Tensor) -> Tensor:
        """(B, 3, W_in / ratio, H_in / ratio) from the x-major depth (B, W, H) in mm."""
        cells = (self.input_size[0] // self.ratio, self.input_size[1] // self.ratio)
        z = F.interpolate(depths[:, None], size=cells, mode='nearest')[:, 0] / 1000.
        factor = depths.shape[1] / cells[0]  # the reference scales both axes by the widths'
        device = depths.device
        ray_x = ((torch.arange(cells[0], device=device, dtype=torch.float64)
                  - intrinsics[:, 0, 2:3] / factor) / (intrinsics[:, 0, 0:1] / factor)).float()
        ray_y = ((torch.arange(cells[1], device=device, dtype=torch.float64)
                  - intrinsics[:, 1, 2:3] / factor) / (intrinsics[:, 1, 1:2] / factor)).float()
        return torch.stack([ray_x[:, :, None] * z, ray_y[:, None, :] * z, z], 1)

    def targets(self, samples: Sequence, depths: Tensor, columns: Dict[str, Dict[str, Tensor]],
                owners: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """The 2-D targets of the moved rectangles on the x-major raw depth (mm)."""
        grid = (*self.input_size, self.ratio, self.anchor_k)
        for s in samples:
            if tuple(s.metainfo.get('hggd_grid', grid)) != grid:
                raise ValueError(f'HGGDDataPreprocessor: the frames\' rectangles were made for '
                                 f'(W_in, H_in, ratio, anchor_k) = {tuple(s.hggd_grid)}, the '
                                 f'preprocessor renders {grid}: give LoadHGGDGrasps the same '
                                 'input_size, ratio and anchor_k')
        max_events = max(int(s.metainfo.get('hggd_max_events', 0)) for s in samples)
        rects = columns['rects']
        maps = render_anchor_maps(rects['centers'], rects['thetas'], rects['widths'],
                                  rects['depths'], owners['rects'], depths, self.input_size,
                                  max_events, self.ratio, self.anchor_k, self.anchor_w,
                                  self.anchor_z)
        loc_map = render_heatmap(columns['heat']['centers'], owners['heat'], len(samples),
                                 self.input_size, self.heatmap_radius)
        return dict(loc_map=loc_map, **maps)

    def _move_tables(self, tables: Dict[str, List[Dict[str, Tensor]]]
                     ) -> Tuple[Dict[str, Dict[str, Tensor]], Dict[str, Tensor]]:
        """Tables of per-frame host tensors (rows in the first dimension) on the device, one
        transfer per dtype for all of them: per table, its columns concatenated over the frames
        (contiguous views) and the (rows,) int64 frame of each row."""
        pieces: Dict[torch.dtype, list] = {}
        for table, frames in tables.items():
            counts = [len(next(iter(f.values()))) for f in frames]
            rows = sum(counts)
            owner = torch.repeat_interleave(torch.arange(len(frames)), torch.tensor(counts),
                                            output_size=rows)
            for key in frames[0]:
                parts = [f[key] for f in frames]
                pieces.setdefault(parts[0].dtype, []).append(
                    (table, key, (rows, *parts[0].shape[1:]), parts))
            pieces.setdefault(torch.int64, []).append((table, '', (rows,), [owner]))
        out: Dict[str, Dict[str, Tensor]] = {table: {} for table in tables}
        for items in pieces.values():
            moved = self._move(torch.cat([p.reshape(-1) for *_, parts in items for p in parts]))
            sizes = [math.prod(shape) for _, _, shape, _ in items]
            for (table, key, shape, _), part in zip(items, moved.split(sizes)):
                out[table][key] = part.view(shape)
        return out, {table: columns.pop('') for table, columns in out.items()}


def _one_factor(samples: Sequence) -> float:
    factors = {float(s.metainfo.get('factor_depth', 1000.)) for s in samples}
    if len(factors) != 1 or not all(math.isfinite(f) and f > 0 for f in factors):
        raise ValueError(f'HGGDDataPreprocessor: a batch needs one positive factor_depth, '
                         f'got {sorted(factors)} (frames of different cameras in one batch?)')
    return factors.pop()
