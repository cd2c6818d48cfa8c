from .point_ops import (ball_query, cylinder_query, furthest_point_sample, gather_points,
                        group_points, knn, three_nn_interpolate)
from .sparse_conv import (SparseBatchNorm, SparseConv3d, SparseConvTranspose3d, SparseReLU,
                          SparseTensor, hash_coords, kernel_offsets, sparse_cat, unhash_coords,
                          voxelize)

__all__ = [
    'SparseTensor', 'SparseConv3d', 'SparseConvTranspose3d', 'SparseBatchNorm', 'SparseReLU',
    'sparse_cat', 'voxelize', 'hash_coords', 'unhash_coords', 'kernel_offsets',
    'furthest_point_sample', 'knn', 'ball_query', 'cylinder_query', 'group_points',
    'gather_points', 'three_nn_interpolate'
]
