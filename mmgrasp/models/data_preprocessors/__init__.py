from .grasp_data_preprocessor import GraspDataPreprocessor

__all__ = ['GraspDataPreprocessor']
