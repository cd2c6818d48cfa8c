"""HGGD (Chen et al., RA-L 2023; THU-VCLab/HGGD): a 2-D network finds grasp centres and
in-plane angles in an RGB-D image, the centres are lifted into the cloud, and a PointNet on each
centre's region completes the 6-DoF grasp (docs/advanced_guides/hggd_model.md)."""
import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from mmgrasp.geometry import grasp_nms, hggd_collision_free
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.structures.data_sample import GraspDataSample
from mmgrasp.utils.random import frame_rng, sample_rng
from ..backbones.hggd_anchor_net import HEAD_STRIDE, check_image_size
from ..utils.hggd_anchors import HGGDAnchors
from ..utils.hggd_centers import (Centers, ball_radius, lift_centers, process_outputs,
                                  select_centers)
from ..utils.hggd_grasps import decode_grasps
from ..utils.hggd_regions import crop_regions, fuse_features
from ..losses.hggd_loss import local_labels, match_labels
from .base import GraspDetector

#: Test-time processing (``model.test_cfg``), as the reference test script runs it: the
#: collision filter (``mode='graspnet'`` on the sampled cloud, voxel 0.01 m, approach 0.05 m),
#: then graspnetAPI's grasp NMS (0.03 m, 30 degrees; ``test_graspnet.py:269-276``), before the
#: dump. ``collision`` / ``nms`` False switch a step off.
HGGD_TEST_CFG = dict(collision=True, collision_voxel_size=0.01, approach_dist=0.05, nms=True,
                     nms_translation=0.03, nms_rotation=30.0)
LABEL_FIELDS = ('centers_2d', 'center_z_depths', 'thetas_rad', 'gammas_rad', 'betas_rad')


@MODELS.register_module()
class HGGD(GraspDetector):
    """AnchorGraspNet → heatmap blur, grid-based centres, 2-D grasps → lifting, kNN feature
    fusion, local regions → PointMultiGraspNet → (training) label assignment and losses /
    (test) the top anchors as 6-DoF grasps, collision-filtered and NMS-ed.

    ``inputs`` (what ``HGGDDataPreprocessor`` gives): ``images`` (B, 4, W, H), ``depths``
    (B, 2W, 2H) raw mm, ``points`` (B, N, 3), ``xyz_maps`` (B, 3, W/8, H/8), ``intrinsics``
    (B, 3, 3); training also ``targets`` (the 2-D maps) and ``grasps`` (B dicts of the frame's
    grasp records, the fields of ``HGGDGrasps``). All x-major.

    Args:
        anchor_net, local_net, loss: the two networks and :class:`HGGDLoss`.
        num_anchors: (γ, β) anchors per angle (7 × 7 = 49 classes).
        train_centers / test_centers: 2-D centres per frame (128 / 48).
        heat_threshold: test-time minimum blurred heat of a centre (training: 0).
        group_points: points per region (512); min_points: smaller regions are dropped (32).
        jitter: N(0, jitter) m added to region points (training and test, as the reference).
        knn: image features fused per scene point from this many xyz-map neighbours (8).
        sigma: σ of the heatmap blur (10; kernel 9).
        anchor_width / anchor_depth: width (px at the image's scale) and depth (mm) anchors.
        top_k: anchors kept per region at test (10); max_gamma: limit of abs(γ) at test (degrees).
        seed: seed of the model's draws (regions); training draws come from (seed, epoch,
            sample index), test draws from (seed, scene, camera, frame).
        center_order: 'grasp' keeps each lifted centre with its own 2-D grasp; 'reference'
            pairs them as the reference code does after a zero-depth centre (its lifted rows
            hold the read centres first, the fixed-up ones last, while the 2-D grasps keep
            their order), to reproduce the published checkpoints' figures
            (:func:`lift_centers`).
    """

    def __init__(self, anchor_net: Optional[dict] = None, local_net: Optional[dict] = None,
                 loss: Optional[dict] = None, num_anchors: int = 7, train_centers: int = 128,
                 test_centers: int = 48, heat_threshold: float = 0.01, group_points: int = 512,
                 min_points: int = 32, jitter: float = 5e-4, knn: int = 8, sigma: float = 10.0,
                 anchor_width: float = 50.0, anchor_depth: float = 20.0, top_k: int = 10,
                 max_gamma: float = 60.0, seed: int = 0, center_order: str = 'grasp',
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None, test_cfg: Optional[dict] = None,
                 point_ops: str = 'auto'):
        super().__init__(data_preprocessor, init_cfg, None, point_ops)
        self.anchor_net = build_in_scope(MODELS, anchor_net or dict(type='AnchorGraspNet'))
        self.local_net = build_in_scope(MODELS, local_net or dict(
            type='PointMultiGraspNet', num_anchors=num_anchors ** 2,
            feature_channels=self.anchor_net.feature_channels))
        self.loss_fn = build_in_scope(MODELS, loss or dict(type='HGGDLoss'))
        self.anchors = HGGDAnchors(num_anchors)
        self.train_centers, self.test_centers = train_centers, test_centers
        self.heat_threshold, self.sigma = heat_threshold, sigma
        self.group_points, self.min_points, self.jitter, self.knn = (group_points, min_points,
                                                                     jitter, knn)
        self.anchor_width, self.anchor_depth = anchor_width, anchor_depth
        self.top_k, self.max_gamma, self.seed = top_k, math.radians(max_gamma), seed
        if center_order not in ('grasp', 'reference'):
            raise ValueError(f"HGGD: center_order must be 'grasp' or 'reference', got "
                             f'{center_order!r}')
        self.center_order = center_order
        unknown = sorted(set(test_cfg or {}) - set(HGGD_TEST_CFG))
        if unknown:
            raise ValueError(f'HGGD: unknown test_cfg keys {unknown}; known: '
                             f'{sorted(HGGD_TEST_CFG)}')
        self.test_cfg = {**HGGD_TEST_CFG, **(test_cfg or {})}

    # ---- shared stages ----

    def generators(self, data_samples: Optional[List[GraspDataSample]], batch: int,
                   device: torch.device) -> List[torch.Generator]:
        """One generator per frame: (seed, epoch, sample index) in training, (seed, scene,
        camera, frame) at test; a sample without ids is keyed by its place in the batch."""
        out = []
        for b in range(batch):
            meta = data_samples[b].metainfo if data_samples else {}
            if not self.training and all(k in meta for k in ('scene', 'camera', 'frame')):
                rng = frame_rng(self.seed, meta['scene'], meta['camera'], meta['frame'])
            else:
                rng = sample_rng(self.seed, meta.get('epoch', 0), meta.get('sample_idx', b))
            out.append(torch.Generator(device=device).manual_seed(int(rng.integers(2 ** 62))))
        return out

    def _seed_stage(self, inputs: dict) -> Dict[str, Tensor]:
        images = inputs['images']
        check_image_size(images.shape[2], images.shape[3])
        with self.timer('backbone'):
            return self.anchor_net(images)

    def _regions(self, inputs: dict, out: Dict[str, Tensor], num_centers: int,
                 threshold: float, generators: List[torch.Generator]
                 ) -> Optional[Tuple[Tensor, Tensor, Centers, Tensor]]:
        """The local network's inputs: regions (V, P, 3 + C), info (V, 3) (θ, width px,
        depth offset mm), the kept 2-D grasps and their lifted centres (V, 3) float64; None
        when no region is left."""
        heat_size = tuple(out['loc_map'].shape[2:])
        with self.timer('seed_selection'):
            maps = process_outputs(out, self.sigma)
            centers = select_centers(maps, num_centers, threshold, HEAD_STRIDE,
                                     self.anchor_width, self.anchor_depth)
            if len(centers) == 0:
                return None
            intrinsics = inputs['intrinsics'].double()
            lifted = lift_centers(centers, inputs['depths'], intrinsics, heat_size,
                                  reference_order=self.center_order == 'reference')
            scale = inputs['depths'].shape[1] // heat_size[0]
            radius = ball_radius(centers, lifted[:, 2], intrinsics, scale)
        with self.timer('grouper'):
            points = inputs['points']
            fused = fuse_features(points, out['features'], inputs['xyz_maps'], self.knn)
            regions, keep = crop_regions(points, fused, lifted, centers.frame,
                                         centers.host_frame, radius, generators,
                                         self.group_points, self.min_points, self.jitter)
        if len(keep) == 0:
            return None
        kept = centers.select(keep)
        info = torch.stack([kept.theta, kept.width, kept.depth_offset], 1).float()
        return regions, info, kept, lifted[torch.from_numpy(keep).to(lifted.device)]

    # ---- training ----

    def loss(self, inputs: dict, data_samples: List[GraspDataSample]) -> Dict[str, Tensor]:
        for key in ('targets', 'grasps'):
            if key not in inputs:
                raise KeyError(f"HGGD.loss needs inputs['{key}']: use HGGDDataPreprocessor "
                               f"with the grasp records packed (LoadHGGDGrasps)")
        out = self._seed_stage(inputs)
        with self.timer('losses'):
            losses = self.loss_fn.anchor_losses(out, inputs['targets'])
        batch = inputs['images'].shape[0]
        generators = self.generators(data_samples, batch, inputs['images'].device)
        with torch.no_grad():
            found = self._regions(inputs, out, self.train_centers, 0.0, generators)
        if found is None or len(found[0]) < 2:  # BatchNorm needs two regions to train
            zero = out['loc_map'].new_zeros(())
            return {**losses, 'loss_multi_cls': zero, 'loss_offset': zero}
        regions, info, kept, centers = found
        with self.timer('head'):
            keep = dropout_mask(self.local_net, kept.host_frame, generators)
            pred, offset = self.local_net(regions, info, keep)
        with self.timer('assigner'):
            soft, offset_labels = self.assign(inputs, kept, centers)
        with self.timer('losses'):
            losses.update(self.loss_fn.local_losses(pred, offset, soft, offset_labels))
        return losses

    @torch.no_grad()
    def assign(self, inputs: dict, kept: Centers, centers: Tensor) -> Tuple[Tensor, Tensor]:
        """Soft labels (V, A) and offset labels (V, A, 3) of the regions; the matched labels'
        (γ, β) update the anchor shift first (as the reference shifts before its loss)."""
        table, counts = label_table(inputs['grasps'], inputs['intrinsics'].double())
        index, valid = match_labels(centers, kept.frame, table[..., :3], counts,
                                    self.loss_fn.label_radius, self.loss_fn.max_labels)
        frames = kept.frame[:, None].expand_as(index)
        matched = table[frames, index]  # (V, K, 6)
        offsets = (matched[..., :3].double() - centers[:, None]).float()
        self.anchors.update(matched[..., 4], matched[..., 5], valid)
        return local_labels(kept.theta.float(), self.anchors.eulers(), matched[..., 3:],
                            offsets, valid)

    # ---- test ----

    def predict(self, inputs: dict, data_samples: Optional[List[GraspDataSample]] = None
                ) -> List[GraspDataSample]:
        """Each sample gets ``pred_grasps`` (M, 17) float32 GraspNet rows (score, width,
        height, depth, rotation row-major, translation, object id −1), best first, after the
        collision filter and grasp NMS of ``test_cfg``."""
        out = self._seed_stage(inputs)
        batch = inputs['images'].shape[0]
        found = self._regions(inputs, out, self.test_centers, self.heat_threshold,
                              self.generators(data_samples, batch, inputs['images'].device))
        rows = torch.zeros(0, 17, dtype=torch.float64, device=inputs['images'].device)
        frames = torch.zeros(0, dtype=torch.long, device=rows.device)
        if found is not None:
            regions, info, kept, centers = found
            with self.timer('head'):
                pred, offset = self.local_net(regions, info)
            scale = inputs['depths'].shape[1] / out['loc_map'].shape[2]
            rows, frames = decode_grasps(centers, kept.theta, kept.width, kept.frame, pred,
                                         offset, self.anchors.gamma, self.anchors.beta,
                                         inputs['intrinsics'].double(), scale, self.top_k,
                                         self.max_gamma)
        return self._results(inputs, rows, frames, data_samples, batch)

    def _results(self, inputs: dict, rows: Tensor, frames: Tensor,
                 data_samples: Optional[List[GraspDataSample]], batch: int
                 ) -> List[GraspDataSample]:
        host_rows, host_frames = nearest_rotations(rows.cpu().numpy()), frames.cpu().numpy()
        cloud = inputs['points'].detach().cpu().numpy() if self.test_cfg['collision'] else None
        results = []
        for b in range(batch):
            frame_rows = host_rows[host_frames == b]
            if cloud is not None and len(frame_rows):
                frame_rows = frame_rows[hggd_collision_free(
                    frame_rows, cloud[b], self.test_cfg['collision_voxel_size'],
                    self.test_cfg['approach_dist'])]
            if self.test_cfg['nms']:  # sorted best first (grasp_nms's tie order)
                frame_rows = grasp_nms(frame_rows, self.test_cfg['nms_translation'],
                                       math.radians(self.test_cfg['nms_rotation']))
            else:
                frame_rows = frame_rows[np.argsort(-frame_rows[:, 0], kind='stable')]
            sample = (data_samples[b] if data_samples else GraspDataSample()).clone()
            sample.pred_grasps = torch.from_numpy(frame_rows.astype(np.float32)).to(rows.device)
            results.append(sample)
        return results


def nearest_rotations(rows: np.ndarray) -> np.ndarray:
    """GraspNet rows with each rotation replaced by the nearest rotation matrix (polar
    decomposition, float64). The reference's R0 has unit columns that are orthogonal only to
    ~1e-4 (its jaw and height vectors are back-projected separately); the evaluator refuses
    rotations off by more than 1e-5, and the collision filter and NMS assume rotations."""
    rows = np.array(rows, dtype=np.float64)
    if not len(rows):
        return rows
    u, _, vt = np.linalg.svd(rows[:, 4:13].reshape(-1, 3, 3))
    fix = np.where(np.linalg.det(u @ vt) < 0, -1.0, 1.0)  # a proper rotation, never a reflection
    u[:, :, 2] *= fix[:, None]
    rows[:, 4:13] = (u @ vt).reshape(-1, 9)
    return rows


def dropout_mask(local_net, frames: np.ndarray, generators: List[torch.Generator]
                 ) -> Optional[Tensor]:
    """The local network's dropout mask (V, width) for regions of ``frames`` (host, frame-
    major), each row drawn from its frame's generator: 1 / (1 − p) kept, 0 dropped."""
    dropout = local_net.point_layer[2]
    width = local_net.point_layer[0].out_features
    if not isinstance(dropout, torch.nn.Dropout) or len(frames) == 0:
        return None
    device = local_net.point_layer[0].weight.device
    parts = [torch.rand(n, width, generator=generators[b], device=device) >= dropout.p
             for b, n in enumerate(np.bincount(frames, minlength=len(generators)).tolist()) if n]
    return torch.cat(parts).float() / (1 - dropout.p)


def label_table(grasps: List[Dict[str, Tensor]], intrinsics: Tensor) -> Tuple[Tensor, List[int]]:
    """(B, L, 6) float32 rows (x, y, z, θ, γ, β) of the frames' grasp records, zero-padded to
    the most a frame has, and the record counts. The centres are back-projected from
    (``centers_2d`` px, ``center_z_depths`` mm) with their frame's ``intrinsics`` (B, 3, 3),
    all frames in one pass (the same arithmetic per row as frame by frame)."""
    for g in grasps:
        missing = [f for f in LABEL_FIELDS if f not in g]
        if missing:
            raise KeyError(f"HGGD: inputs['grasps'] records lack {missing}; expected the "
                           f"fields of HGGDGrasps")
    counts = [len(g['thetas_rad']) for g in grasps]
    table = torch.zeros(len(grasps), max(counts + [0]), 6, dtype=torch.float32,
                        device=intrinsics.device)
    if sum(counts) == 0:
        return table, counts
    rows = {f: torch.cat([g[f] for g in grasps]).double() for f in LABEL_FIELDS}
    frame, slot = torch.from_numpy(np.stack([  # one upload of the rows' places
        np.repeat(np.arange(len(grasps)), counts),
        np.concatenate([np.arange(n) for n in counts])])).to(intrinsics.device)
    k = intrinsics[frame]
    uv, z = rows['centers_2d'], rows['center_z_depths'] / 1000.0
    x = z / k[:, 0, 0] * (uv[:, 0] - k[:, 0, 2])
    y = z / k[:, 1, 1] * (uv[:, 1] - k[:, 1, 2])
    table[frame, slot] = torch.stack([x, y, z, rows['thetas_rad'], rows['gammas_rad'],
                                      rows['betas_rad']], 1).float()
    return table, counts
