from .grasp_geometry import (GRASP_HEIGHT, GRASP_MAX_WIDTH, approach_to_matrix,
                             generate_grasp_views)
from .part_timer import PartTimer

__all__ = ['GRASP_HEIGHT', 'GRASP_MAX_WIDTH', 'PartTimer', 'approach_to_matrix',
           'generate_grasp_views']
