from .economicgrasp import EconomicGrasp
from .finegrasp import FineGrasp
from .gsnet import GSNet
from .graspnet_baseline import GraspNetBaseline, ScaleBalancedGrasp

__all__ = ['EconomicGrasp', 'FineGrasp', 'GSNet', 'GraspNetBaseline', 'ScaleBalancedGrasp']
