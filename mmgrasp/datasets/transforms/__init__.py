from .augmentation import RandomFlipRotateScene
from .depth_image import LoadDepthImage
from .formatting import PackGraspInputs
from .grasp_labels import SampleGraspLabels
from .loading import LoadGraspScene

__all__ = ['LoadDepthImage', 'LoadGraspScene', 'PackGraspInputs', 'RandomFlipRotateScene', 'SampleGraspLabels']
