from .assigners import *  # noqa: F401,F403
from .data_preprocessors import *  # noqa: F401,F403
