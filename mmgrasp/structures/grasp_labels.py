"""Per-object grasp labels and the one way model code reads their grids: :func:`gather_grids`.

An :class:`ObjectGraspLabels` carries the label points and pose of one object instance of a
frame, and its grids either densely (tensors, the reference path) or as a deferred record that
knows where the rows live (``grids='deferred'``). Model code never looks at which: it asks
``gather_grids`` for the cells it matched, after the network has chosen its seeds.
"""
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import (ClassVar, Dict, Iterator, Optional, Protocol, Sequence, Tuple,
                    runtime_checkable)

import torch
from torch import Tensor

GRID_NAMES = ('scores', 'widths', 'collision', 'tolerance')
COLLISION_MODES = ('zero_scores', 'mask', 'none')


@runtime_checkable
class DeferredGrids(Protocol):
    """What a deferrable label source returns from ``defer(rows, collision=...)``.

    The record travels from a loader worker to the model, so it must be small and picklable.
    ``gather`` reads for a whole group of records at once (every object of every frame of a
    batch): request k reads label point ``rows[k]`` of ``readers[owner[k]]``.
    """

    @property
    def num_points(self) -> int:
        """Label points (rows) this record covers."""

    @property
    def collision_mode(self) -> str:
        """One of :data:`COLLISION_MODES`."""

    @property
    def has_tolerance(self) -> bool:
        """Whether ``gather(..., 'tolerance', ...)`` may be asked."""

    @classmethod
    def gather(cls, readers: Sequence['DeferredGrids'], name: str, owner: Tensor, rows: Tensor,
               views: Optional[Tensor]) -> Optional[Tensor]:
        """Same contract as :func:`gather_grids`."""


@dataclass
class ObjectGraspLabels:
    """Labels of one object instance in one frame.

    Attributes:
        points: (n, 3) float32 label points in the object's model frame.
        pose: (3, 4) float32 model -> camera transform (after augmentation).
        object_id: 0-based GraspNet object id.
        collision_mode: how scene collisions are applied (:data:`COLLISION_MODES`).
        scores: (n, V, A, D) float32 μ (−1 infeasible, 0 collided under ``'zero_scores'``);
            None when deferred, so code that indexes it directly fails loudly.
        widths: (n, V, A, D) float32 metres; None when deferred.
        collision: (n, V, A, D) bool scene collision, only under ``collision_mode='mask'``.
        tolerance: (n, V, A, D) float32 radius, when the recipe carries tolerance.
        deferred: the record that reads the grids later, when deferred.
    """
    points: Tensor
    pose: Tensor
    object_id: int
    collision_mode: str = 'zero_scores'
    scores: Optional[Tensor] = None
    widths: Optional[Tensor] = None
    collision: Optional[Tensor] = None
    tolerance: Optional[Tensor] = None
    deferred: Optional[DeferredGrids] = field(default=None, repr=False)

    _DENSE: ClassVar[Tuple[str, ...]] = ('scores', 'widths', 'collision', 'tolerance')

    def __post_init__(self) -> None:
        if self.collision_mode not in COLLISION_MODES:
            raise ValueError(f'collision_mode={self.collision_mode!r}: expected one of '
                             f'{COLLISION_MODES}')
        if (self.deferred is None) == (self.scores is None):
            raise ValueError('ObjectGraspLabels needs either dense scores or a deferred record')

    @property
    def is_deferred(self) -> bool:
        return self.deferred is not None

    @property
    def num_points(self) -> int:
        return len(self.points)

    def to(self, device, non_blocking: bool = False) -> 'ObjectGraspLabels':
        """A copy with the tensors on ``device``; a deferred record stays on the host."""
        moved = {name: getattr(self, name).to(device, non_blocking=non_blocking)
                 for name in ('points', 'pose', *self._DENSE) if getattr(self, name) is not None}
        return replace(self, **moved)

    # Per-object helpers: the same contract as gather_grids for this object alone.
    def _gather(self, name: str, rows: Tensor, views: Optional[Tensor] = None) -> Optional[Tensor]:
        owner = torch.zeros_like(rows)
        return gather_grids([self], name, owner, rows, views)

    def gather_scores(self, rows: Tensor) -> Tensor:
        return self._gather('scores', rows)

    def gather_widths(self, rows: Tensor, views: Optional[Tensor] = None) -> Tensor:
        return self._gather('widths', rows, views)

    def gather_collision(self, rows: Tensor) -> Optional[Tensor]:
        return self._gather('collision', rows)

    def gather_tolerance(self, rows: Tensor, views: Optional[Tensor] = None) -> Tensor:
        return self._gather('tolerance', rows, views)

    def dense(self) -> 'ObjectGraspLabels':
        """Dense labels equal to these (deferred ones read every row: for inspection)."""
        if not self.is_deferred:
            return self
        rows = torch.arange(self.num_points, device=self.points.device)
        grids = {name: self._gather(name, rows) for name in self._DENSE
                 if name != 'tolerance' or self.has_tolerance}
        return replace(self, deferred=None, **grids)

    @property
    def has_tolerance(self) -> bool:
        return self.deferred.has_tolerance if self.is_deferred else self.tolerance is not None


def _check_request(objects: Sequence[ObjectGraspLabels], name: str, owner: Tensor, rows: Tensor,
                   views: Optional[Tensor]) -> None:
    if name not in GRID_NAMES:
        raise KeyError(f'grid name {name!r}: expected one of {GRID_NAMES}')
    if not objects:
        raise ValueError('gather_grids needs at least one object')
    if owner.shape != rows.shape or owner.dim() != 1:
        raise ValueError(f'owner {tuple(owner.shape)} and rows {tuple(rows.shape)} must be equal '
                         f'1-d shapes')
    if views is not None and (views.dim() not in (1, 2) or len(views) != len(rows)):
        raise ValueError(f'views {tuple(views.shape)} must be (K,) or (K, W) for {len(rows)} '
                         f'requests')
    if name == 'tolerance' and not all(o.has_tolerance for o in objects):
        raise KeyError("grid 'tolerance' requested but the labels carry none: set "
                       "SampleGraspLabels(tolerance=True) and generate tolerance files")


def _gather_dense(objects: Sequence[ObjectGraspLabels], name: str, owner: Tensor, rows: Tensor,
                  views: Optional[Tensor]) -> Optional[Tensor]:
    grids = [getattr(o, name) for o in objects]
    if name == 'collision' and any(g is None for g in grids):
        return None
    first = grids[0]
    if views is None:
        shape = (len(rows), *first.shape[1:])
    else:
        shape = (*views.shape, *first.shape[2:])
    out = first.new_empty(shape)
    for index in torch.unique(owner).tolist():
        sel = torch.nonzero(owner == index).squeeze(1)
        grid = grids[index]
        if views is None:
            out[sel] = grid[rows[sel]]
        elif views.dim() == 1:
            out[sel] = grid[rows[sel], views[sel]]
        else:
            out[sel] = grid[rows[sel][:, None], views[sel]]
    return out


def gather_grids(objects: Sequence[ObjectGraspLabels], name: str, owner: Tensor, rows: Tensor,
                 views: Optional[Tensor] = None) -> Optional[Tensor]:
    """Read grid cells of label points that may belong to many objects of many frames.

    Request k reads label point ``rows[k]`` of ``objects[owner[k]]``. Without ``views`` the
    result has shape (K, V, A, D); with ``views`` of shape (K,) (one object-frame view per
    request) it is (K, A, D) and only those cells are read; with ``views`` of shape (K, W)
    it is (K, W, A, D), ``out[k, w] = grid[rows[k], views[k, w]]`` — how an assigner re-indexes
    the object's views into camera-frame slots in the same pass that expands the rows. ``name`` is one of :data:`GRID_NAMES`. Under ``collision_mode='zero_scores'`` the
    scores (and tolerance) already read 0 where the grasp collides with the scene; ``'collision'``
    is None unless the labels carry the mask (``collision_mode='mask'``). Dense and deferred
    labels give identical values; a batch mixes only one kind.
    """
    _check_request(objects, name, owner, rows, views)
    deferred = [o.deferred for o in objects]
    if all(d is None for d in deferred):
        return _gather_dense(objects, name, owner, rows, views)
    kinds = {type(d) for d in deferred}
    if None.__class__ in kinds or len(kinds) > 1:
        raise TypeError(f'gather_grids: objects mix storages {sorted(k.__name__ for k in kinds)}; '
                        f'a batch must be all dense or all deferred by one source')
    return kinds.pop().gather(deferred, name, owner, rows, views)


def reads_matched_cells(objects: Sequence[ObjectGraspLabels]) -> bool:
    """Whether the objects' grids can be read as per-view summaries and single-view cells
    (:func:`gather_view_summaries`, :func:`gather_view_cells`): all deferred by one source that
    offers those reads and has them for every record (a label store with μ codes)."""
    deferred = [o.deferred for o in objects]
    if not deferred or any(d is None for d in deferred) or len({type(d) for d in deferred}) > 1:
        return False
    source = type(deferred[0])
    supports = getattr(source, 'supports_matched_cells', None)
    return supports is not None and supports(deferred)


def gather_view_summaries(objects: Sequence[ObjectGraspLabels], names: Sequence[str],
                          owner: Tensor, rows: Tensor, views: Tensor,
                          first_cell_widths: bool = False) -> Dict[str, Tensor]:
    """Per-view summaries (see ``mmgrasp.storage.labels.summaries``) of label point ``rows[k]``
    of ``objects[owner[k]]`` at its object views ``views[k]`` (K, W), each (K, W), in one read;
    with ``first_cell_widths`` also ``first_cell_width`` (K,), the width of cell (0, 0) at view
    ``views[k, 0]``. Only where :func:`reads_matched_cells` holds."""
    deferred = [o.deferred for o in objects]
    return type(deferred[0]).gather_view_summaries(deferred, names, owner, rows, views,
                                                   first_cell_widths)


def gather_view_cells(objects: Sequence[ObjectGraspLabels], names: Sequence[str],
                      owner: Tensor, rows: Tensor, views: Tensor) -> Dict[str, Tensor]:
    """The (A, D) cells of label point ``rows[k]`` at object view ``views[k]``, (K, A, D) per
    name (``scores``, ``widths``, ``tolerance``, ``collision``), raw (collisions not applied),
    in one read. Only where :func:`reads_matched_cells` holds."""
    deferred = [o.deferred for o in objects]
    return type(deferred[0]).gather_view_cells(deferred, names, owner, rows, views)


@contextmanager
def explain_deferred_grid_access(who: str) -> Iterator[None]:
    """Turn the TypeError of code that indexes ``labels.scores`` (or another grid) directly on
    deferred labels, where it is None, into an error that says what to do instead."""
    try:
        yield
    except TypeError as exc:
        if "'NoneType' object is not subscriptable" not in str(exc):
            raise
        raise TypeError(
            f'{who} indexed a grid of ObjectGraspLabels (scores, widths, collision or '
            f"tolerance) directly; under SampleGraspLabels(grids='deferred') those are None. "
            f'Read grids with gather_grids(labels.objects, name, owner, rows[, views]), or '
            f"train with grids='dense'") from exc
