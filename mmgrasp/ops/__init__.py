"""Kernels and their torch references, below the models
(docs/advanced_guides/architecture.md): pointnet2's point ops (:mod:`.point_ops`, Triton
kernels in :mod:`.point_kernels`), the sparse voxel tensor (:mod:`.sparse_tensor`) and its
convolutions (:mod:`.sparse_conv`, spconv glue in :mod:`.spconv_backend`), the launch-count
regions (:mod:`.kernel_scope`) and the numerics switches that choose between them
(:mod:`.numerics`)."""
from .point_ops import (ball_query, cylinder_query, furthest_point_sample, gather_points,
                        group_points, knn, nearest_squared_distance,
                        three_nn_interpolate)
from .sparse_conv import (SparseBatchNorm, SparseConv3d, SparseConvTranspose3d, SparseReLU,
                          kernel_offsets)
from .sparse_tensor import SparseTensor, hash_coords, sparse_cat, unhash_coords, voxelize

__all__ = [
    'SparseTensor', 'SparseConv3d', 'SparseConvTranspose3d', 'SparseBatchNorm', 'SparseReLU',
    'sparse_cat', 'voxelize', 'hash_coords', 'unhash_coords', 'kernel_offsets',
    'furthest_point_sample', 'knn', 'nearest_squared_distance', 'ball_query', 'cylinder_query',
    'group_points', 'gather_points', 'three_nn_interpolate'
]
