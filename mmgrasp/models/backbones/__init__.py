from .fine_unet import FineGraspUNet
from .hggd_anchor_net import AnchorGraspNet
from .sparse_unet import SparseUNet14
from .pointnet2 import PointNet2Backbone, PointTransformerLightBackbone

__all__ = ['AnchorGraspNet', 'FineGraspUNet', 'PointNet2Backbone', 'PointTransformerLightBackbone',
           'SparseUNet14']
