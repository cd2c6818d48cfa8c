from .augmentation import RandomFlipRotateScene
from .depth_image import LoadDepthImage
from .economic_labels import LoadEconomicLabels
from .formatting import PackGraspInputs
from .grasp_labels import SampleGraspLabels
from .loading import LoadGraspScene

__all__ = ['LoadDepthImage', 'LoadEconomicLabels', 'LoadGraspScene', 'PackGraspInputs', 'RandomFlipRotateScene', 'SampleGraspLabels']
