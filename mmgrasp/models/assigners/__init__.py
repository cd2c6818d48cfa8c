from .economic_assigner import EconomicAssigner
from .nearest_label_assigner import NearestLabelAssigner
from .scale_balanced_assigner import ScaleBalancedAssigner
from .scale_statistic import (best_grasp_widths, compute_scale_statistic,
                              load_or_compute_scale_statistic)

__all__ = ['EconomicAssigner', 'NearestLabelAssigner', 'ScaleBalancedAssigner', 'best_grasp_widths',
           'compute_scale_statistic', 'load_or_compute_scale_statistic']
