"""Where one object instance's label grids live in a label store: the record the readers
(:mod:`.rows`, :mod:`.cells`, :mod:`.common`) read from, below :class:`.grids.StoreGrids`, which
adds the reads to it."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np


@dataclass(frozen=True, eq=False)
class GridLocation:
    """Where the grids of one object instance's kept label points live in a label store.

    Attributes:
        store: the store folder.
        object_id: 0-based object id (selects ``objects/%03d``).
        rows: (n,) int32 rows of the object's files, one per kept label point.
        grid: (V, A, D).
        collision_mode: ``'zero_scores'``, ``'mask'`` or ``'none'``.
        has_tolerance: whether tolerance is carried.
        scene: scene id (selects ``scenes/%04d/collision.npy``).
        collision_offset: first row of this instance in the scene's collision file.
        matched_cells: the store holds the object's μ codes and per-view summaries, so label
            matching can read those instead of whole rows (:mod:`.cells`).
    """
    store: str
    object_id: int
    rows: np.ndarray
    grid: Tuple[int, int, int]
    collision_mode: str
    has_tolerance: bool
    scene: int
    collision_offset: int
    matched_cells: bool = False

    @property
    def num_points(self) -> int:
        return len(self.rows)

    def object_file(self, name: str) -> str:
        return f'{self.store}/objects/{self.object_id:03d}/{name}.npy'

    def collision_file(self) -> str:
        return f'{self.store}/scenes/{self.scene:04d}/collision.npy'

    def summary_file(self, name: str) -> str:
        """Per-view summary ``name``: of the scene instance (rows offset by
        ``collision_offset``) when collisions apply to μ, else of the object."""
        if self.collision_mode == 'none':
            return self.object_file(name)
        return f'{self.store}/scenes/{self.scene:04d}/{name}.npy'
