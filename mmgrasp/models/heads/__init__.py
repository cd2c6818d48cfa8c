from .gsnet_heads import ApproachHead, CloudCrop, GraspableHead, SWADHead

__all__ = ['ApproachHead', 'CloudCrop', 'GraspableHead', 'SWADHead']
