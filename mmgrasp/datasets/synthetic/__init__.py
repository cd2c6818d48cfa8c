"""Small deterministic datasets in the real on-disk layouts, for tests and demos: box and
curved object models (:mod:`.boxes`, :mod:`.shapes`), labelled with the evaluator's physics
(:mod:`.labels`), placed and rendered (:mod:`.scene`), and written as GraspNet-1Billion
(:mod:`.graspnet`) or GraspClutter6D (:mod:`.gc6d`).

Modules import downwards only: shapes -> boxes; scene -> boxes, shapes, labels; graspnet and
gc6d -> scene, labels (the layer test, tests/unit/test_import_layers.py, finds no circle)."""
from .boxes import box_sdf_grid, box_signed_distance, box_surface_grid
from .gc6d import GC6D_CAMERAS, write_graspclutter6d_dataset
from .graspnet import (MAX_MODELS, MU_VALUES, PLY_FORMATS, RS_WRT_KN, TEST_SPLITS,
                       TOLERANCE_RADII, write_synthetic_dataset)
from .scene import camera_intrinsics, model_half_extents, render
from .shapes import SHAPES

__all__ = ['GC6D_CAMERAS', 'MAX_MODELS', 'MU_VALUES', 'PLY_FORMATS', 'RS_WRT_KN', 'SHAPES',
           'TEST_SPLITS', 'TOLERANCE_RADII', 'box_sdf_grid', 'box_signed_distance',
           'box_surface_grid', 'camera_intrinsics', 'model_half_extents', 'render',
           'write_graspclutter6d_dataset', 'write_synthetic_dataset']
