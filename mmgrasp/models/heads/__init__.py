from .economic_heads import AttentionBlock, InteractiveCylinderCrop, InteractiveGraspHead
from .gsnet_heads import ApproachHead, CloudCrop, GraspableHead, SWADHead
from .graspnet_heads import (ApproachNet, DepthCloudCrop, MultiScaleCloudCrop, OperationNet,
                             ToleranceNet)

__all__ = [
    'ApproachHead', 'ApproachNet', 'AttentionBlock', 'InteractiveCylinderCrop',
    'InteractiveGraspHead', 'CloudCrop', 'DepthCloudCrop', 'GraspableHead',
    'MultiScaleCloudCrop', 'OperationNet', 'SWADHead', 'ToleranceNet',
]
