from .sparse_unet import SparseUNet14

__all__ = ['SparseUNet14']
