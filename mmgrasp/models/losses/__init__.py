from .gsnet_loss import GSNetLoss
from .graspnet_loss import GraspNetBaselineLoss, ScaleBalancedGraspLoss

__all__ = ['GSNetLoss', 'GraspNetBaselineLoss', 'ScaleBalancedGraspLoss']
