"""The label readers the model calls after seed selection: whole rows (:mod:`.rows`) and
matched cells (:mod:`.cells`), both through :mod:`.common`, for the objects a
:class:`StoreGrids` record names."""
from .common import pop_map_copy_bytes, pop_map_copy_seconds
from .grids import StoreGrids

__all__ = ['StoreGrids', 'pop_map_copy_bytes', 'pop_map_copy_seconds']
