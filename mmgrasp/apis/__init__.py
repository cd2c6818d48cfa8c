"""Inference on depth images."""
from .grasp_inferencer import GraspInferencer, check_intrinsics, read_depth

__all__ = ['GraspInferencer', 'check_intrinsics', 'read_depth']
