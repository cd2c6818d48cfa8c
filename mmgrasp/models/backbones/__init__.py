from .fine_unet import FineGraspUNet
from .sparse_unet import SparseUNet14
from .pointnet2 import PointNet2Backbone, PointTransformerLightBackbone

__all__ = ['FineGraspUNet', 'PointNet2Backbone', 'PointTransformerLightBackbone', 'SparseUNet14']
