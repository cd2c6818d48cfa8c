from .augmentation import RandomFlipRotateScene
from .depth_image import LoadDepthImage
from .economic_labels import LoadEconomicLabels
from .formatting import PackGraspInputs
from .grasp_labels import SampleGraspLabels
from .hggd import LoadHGGDGrasps, PackHGGDInputs, SampleDepthPixels
from .loading import LoadGraspScene
from .normals import EstimateNormals
from .rgbd_image import LoadRGBDImage

__all__ = ['EstimateNormals', 'LoadDepthImage', 'LoadEconomicLabels', 'LoadGraspScene', 'LoadHGGDGrasps', 'LoadRGBDImage', 'PackGraspInputs', 'PackHGGDInputs', 'RandomFlipRotateScene', 'SampleDepthPixels', 'SampleGraspLabels']
