from .gsnet import GSNet
from .graspnet_baseline import GraspNetBaseline, ScaleBalancedGrasp

__all__ = ['GSNet', 'GraspNetBaseline', 'ScaleBalancedGrasp']
