from .graspnetapi_compat import GraspNetEval  # noqa: F401
from .metrics import *  # noqa: F401,F403
