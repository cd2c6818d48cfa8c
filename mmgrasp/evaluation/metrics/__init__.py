from .grasp_dump import GraspDumpMetric
from .graspnet_metric import GraspNetMetric

__all__ = ['GraspDumpMetric', 'GraspNetMetric']
