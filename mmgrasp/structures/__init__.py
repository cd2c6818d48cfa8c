from .data_sample import GraspDataSample
from .grasp_labels import (COLLISION_MODES, GRID_NAMES, DeferredGrids, ObjectGraspLabels,
                           gather_grids)
from .label_batch import GraspLabelBatch
from .label_visibility import PendingVisibility
from .matched_labels import MatchedLabels

__all__ = ['COLLISION_MODES', 'GRID_NAMES', 'DeferredGrids', 'GraspDataSample',
           'GraspLabelBatch', 'MatchedLabels', 'ObjectGraspLabels', 'PendingVisibility',
           'gather_grids']
