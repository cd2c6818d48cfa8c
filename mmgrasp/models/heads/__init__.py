from .economic_heads import AttentionBlock, InteractiveCylinderCrop, InteractiveGraspHead
from .finegrasp_heads import (GroupTransformerFusion, MultiScaleInteractiveCrop,
                              TransformerEncoderLayer)
from .hggd_local_net import PointMultiGraspNet
from .gsnet_heads import ApproachHead, CloudCrop, GraspableHead, SWADHead
from .graspnet_heads import (ApproachNet, DepthCloudCrop, MultiScaleCloudCrop, OperationNet,
                             ToleranceNet)

__all__ = [
    'ApproachHead', 'ApproachNet', 'AttentionBlock', 'InteractiveCylinderCrop',
    'InteractiveGraspHead', 'CloudCrop', 'DepthCloudCrop', 'GraspableHead',
    'GroupTransformerFusion', 'MultiScaleInteractiveCrop', 'TransformerEncoderLayer',
    'MultiScaleCloudCrop', 'OperationNet', 'PointMultiGraspNet', 'SWADHead', 'ToleranceNet',
]
