"""FineGrasp (HorizonRobotics/RoboOrchardLab ``robo_orchard_lab/models/finegrasp/`` @241bbc6,
``projects/finegrasp_graspnet1b``): EconomicGrasp with xyz + normal input features, four
cylinder groups fused by a transformer, trained on EconomicGrasp's labels.

What is EconomicGrasp's, reused unchanged: the seed stage (graspable mask, FPS to 1 024 seeds
among points with objectness and graspness > 0.1), the view head (its hidden features added back
to the seeds; multinomial view in training, argmax at inference), the label assigner
(``process_grasp_labels`` of ``finegrasp/utils.py`` is EconomicGrasp's), the grasp head
(``LocalInteraction`` = ``Grasp_Head_Local_Interaction``), the decoding (``pred_decode``) and
the loss: the seven loss classes the FineGrasp config builds (``ObjectnessLoss``,
``GraspnessLoss``, ``ViewLoss``, ``AngleLoss``, ``DepthLoss``, ``ScoreClsLoss``, ``WidthLoss``
with weights 1, 10, 100, 1, 1, 1, 10) compute term for term what ``loss_economicgrasp.py``
computes, so the loss is :class:`~mmgrasp.models.losses.EconomicGraspLoss`.
"""
from typing import Optional

import torch
from torch import Tensor

from mmgrasp.registry import MODELS
from ..heads.finegrasp_heads import MultiScaleInteractiveCrop
from .economicgrasp import EconomicGrasp


@MODELS.register_module()
class FineGrasp(EconomicGrasp):
    """EconomicGrasp's pipeline with :class:`MultiScaleInteractiveCrop` as the crop and, with
    ``use_normals``, the points' xyz and normals (6 channels) as the backbone's input
    features (the reference's ``use_normal=True``, its GraspNet-1Billion config; without it
    the features are all ones, 3 channels, its pick-and-place config).

    Args:
        use_normals: feed ``cat(points, inputs['normals'])`` to the backbone (which must then
            have ``in_channels`` 6); else all ones (``in_channels`` 3).
        crop: :class:`MultiScaleInteractiveCrop` options.
        others: :class:`~.economicgrasp.EconomicGrasp`'s.
    """

    crop_type = MultiScaleInteractiveCrop

    def __init__(self, backbone: dict, use_normals: bool = True, **kwargs):
        super().__init__(backbone, **kwargs)
        self.use_normals = bool(use_normals)
        expected = 6 if self.use_normals else 3
        in_channels = getattr(self.backbone, 'in_channels', expected)
        if in_channels != expected:
            raise ValueError(f'FineGrasp(use_normals={self.use_normals}) feeds {expected} '
                             f'input channels but the backbone has in_channels={in_channels}')

    def input_features(self, inputs: dict) -> Optional[Tensor]:
        """(B, N, 6) xyz (after augmentation) and normals as the reference's
        ``torch.cat([point_clouds, cloud_normal], -1)``; None (all ones) without normals."""
        if not self.use_normals:
            return None
        if 'normals' not in inputs:
            raise KeyError("FineGrasp(use_normals=True) needs inputs['normals'] (B, N, 3): add "
                           "the normals transform and 'normals' to PackGraspInputs' keys")
        points, normals = inputs['points'], inputs['normals']
        if normals.shape != points.shape:
            raise ValueError(f"FineGrasp: inputs['normals'] {tuple(normals.shape)} does not "
                             f"match inputs['points'] {tuple(points.shape)}")
        return torch.cat([points, normals.to(points.dtype)], dim=-1)
