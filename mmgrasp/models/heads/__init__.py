from .gsnet_heads import ApproachHead, CloudCrop, GraspableHead, SWADHead
from .graspnet_heads import (ApproachNet, DepthCloudCrop, MultiScaleCloudCrop, OperationNet,
                             ToleranceNet)

__all__ = [
    'ApproachHead', 'ApproachNet', 'CloudCrop', 'DepthCloudCrop', 'GraspableHead',
    'MultiScaleCloudCrop', 'OperationNet', 'SWADHead', 'ToleranceNet',
]
