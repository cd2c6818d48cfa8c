from .grasp_data_preprocessor import GraspDataPreprocessor
from .hggd_data_preprocessor import HGGDDataPreprocessor

__all__ = ['GraspDataPreprocessor', 'HGGDDataPreprocessor']
