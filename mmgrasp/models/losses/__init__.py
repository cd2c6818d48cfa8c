from .economic_loss import EconomicGraspLoss
from .gsnet_loss import GSNetLoss
from .hggd_loss import HGGDLoss
from .graspnet_loss import GraspNetBaselineLoss, ScaleBalancedGraspLoss

__all__ = ['EconomicGraspLoss', 'GSNetLoss', 'HGGDLoss', 'GraspNetBaselineLoss',
           'ScaleBalancedGraspLoss']
