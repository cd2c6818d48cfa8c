from .augmentation import RandomFlipRotateScene
from .formatting import PackGraspInputs
from .grasp_labels import SampleGraspLabels
from .loading import LoadGraspScene

__all__ = ['LoadGraspScene', 'PackGraspInputs', 'RandomFlipRotateScene', 'SampleGraspLabels']
