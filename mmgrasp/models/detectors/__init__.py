from .economicgrasp import EconomicGrasp
from .finegrasp import FineGrasp
from .gsnet import GSNet
from .hggd import HGGD
from .graspnet_baseline import GraspNetBaseline, ScaleBalancedGrasp

__all__ = ['EconomicGrasp', 'FineGrasp', 'GSNet', 'HGGD', 'GraspNetBaseline',
           'ScaleBalancedGrasp']
