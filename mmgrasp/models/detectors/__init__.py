from .economicgrasp import EconomicGrasp
from .gsnet import GSNet
from .graspnet_baseline import GraspNetBaseline, ScaleBalancedGrasp

__all__ = ['EconomicGrasp', 'GSNet', 'GraspNetBaseline', 'ScaleBalancedGrasp']
