from .grasp_dump import GraspDumpMetric
from .graspclutter6d_metric import GraspClutter6DMetric
from .graspnet_metric import GraspNetMetric

__all__ = ['GraspClutter6DMetric', 'GraspDumpMetric', 'GraspNetMetric']
