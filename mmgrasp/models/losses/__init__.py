from .economic_loss import EconomicGraspLoss
from .gsnet_loss import GSNetLoss
from .graspnet_loss import GraspNetBaselineLoss, ScaleBalancedGraspLoss

__all__ = ['EconomicGraspLoss', 'GSNetLoss', 'GraspNetBaselineLoss', 'ScaleBalancedGraspLoss']
