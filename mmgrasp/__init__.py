"""mmgrasp: 6-DoF grasp detectors on GraspNet-1Billion-style data, with label grids read where
they are needed (inside the model, after seed selection) from memory-mapped files."""
from .utils.checkpoint_compat import allow_mmengine_checkpoints
from .version import __version__

allow_mmengine_checkpoints()

__all__ = ['__version__']
