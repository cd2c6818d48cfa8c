from .grasp_dump import GraspDumpMetric

__all__ = ['GraspDumpMetric']
