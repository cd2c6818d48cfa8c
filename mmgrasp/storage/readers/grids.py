"""The record a loader ships per object instead of its grids, and the reads it serves."""
from typing import Optional, Sequence

from torch import Tensor

from .cells import gather_view_cells, gather_view_summaries
from .location import GridLocation
from .rows import gather_rows


class StoreGrids(GridLocation):
    """The :class:`.location.GridLocation` record a loader ships per object instead of its
    grids, with the reads it serves (whole rows, per-view summaries, matched cells)."""

    @classmethod
    def gather(cls, readers: Sequence['StoreGrids'], name: str, owner: Tensor, rows: Tensor,
               views: Optional[Tensor]) -> Optional[Tensor]:
        return gather_rows(readers, name, owner, rows, views)

    @classmethod
    def supports_matched_cells(cls, readers: Sequence['StoreGrids']) -> bool:
        return all(r.matched_cells for r in readers)

    @classmethod
    def gather_view_summaries(cls, readers: Sequence['StoreGrids'], names: Sequence[str],
                              owner: Tensor, rows: Tensor, views: Tensor,
                              first_cell_widths: bool = False) -> dict:
        return gather_view_summaries(readers, names, owner, rows, views, first_cell_widths)

    @classmethod
    def gather_view_cells(cls, readers: Sequence['StoreGrids'], names: Sequence[str],
                          owner: Tensor, rows: Tensor, views: Tensor) -> dict:
        return gather_view_cells(readers, names, owner, rows, views)
