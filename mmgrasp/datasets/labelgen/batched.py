"""The label grids of :mod:`.object_labels` batched in torch, on the CPU or a CUDA device: the
same cells, the same physics, the same float64 operations where they are elementwise.

Per chunk of label points, every step runs on whole tensors, and the cells that cannot hold
leave before the costly steps: centres outside the object (one lookup); a first exit wider
than the gripper (the other side is not traced); contacts not found on the first jaw (the
second jaw is not closed); a first contact whose normal already leaves the widest friction
cone (the second normal is not fitted). What differs from the numpy reference, and why the
labels still agree (tests/unit/datasets/test_labelgen_batched.py; the differing cells of a
full object are counted in docs/notes/benchmarks/label_generation.md):

- the jaws' contact search evaluates its samples a window at a time from the open jaw and
  skips samples the field's Lipschitz bound proves far from the surface (the numpy path
  evaluates every sample of every line); the first accepted sample is the same;
- dexnet's quadratic fit is solved in closed form (Cramer's rule, the roots in LAPACK's order:
  the larger first) where numpy calls LAPACK (``solve``, ``eigvals``), and the plane fit of a
  normal takes the eigenvector of the probes' 3 x 3 scatter where numpy takes the SVD of the
  probes: last-bit differences, mostly erased by the float32 casts that follow, that move a
  label only where an antipodal angle ties a friction cone;
- points outside the SDF's grid take a positive stand-in (their distance to the grid plus two
  surface bands) instead of dexnet's nearest-surface-cell rule: both are outside and off the
  surface band, which is all the labels read there, given the grid's margin (at least 3
  cells between the surface and the border, checked).

Widths are the numpy path's bit for bit (sphere tracing and bisection are elementwise).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from mmgrasp.geometry import Gripper, SignedDistanceField
from ..synthetic.labels import MU_GRID, grasp_frames
from .jaw_line import SUBSTEPS, field_lipschitz, jaw_axes

F64 = torch.float64
_CORNERS = ((0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 0, 1),
            (1, 1, 1))  # dexnet's order, as mmgrasp.geometry.sdf
_ORDER = [4 * i + 2 * j + k for i, j, k in _CORNERS]  # dexnet's order among x-major corners
_OFF_CENTRE = [i for i in range(27) if i != 13]  # the normals' probes other than (0, 0, 0)
LOOKUP_BLOCK = 1 << 15
NORMAL_BLOCK = 1 << 13
#: the CPU checks on the host whether a block of lookups has points off the grid
HOST_CHECKS = True
#: samples of a jaw's line of action evaluated per round of the contact search
WINDOW = 6


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row dot products of (K, 3) tensors, summed in numpy's order (x, y, then z)."""
    return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]


def _norm(a: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(_dot(a, a))


def default_device() -> torch.device:
    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')


class BatchedField:
    """A :class:`SignedDistanceField` as tensors on ``device``: trilinear values in dexnet's
    corner order, float32 on every change of frame, the plane-fit normals."""

    def __init__(self, sdf: SignedDistanceField, device):
        margin = np.minimum(sdf.surface_cells.min(0), sdf.dims - 1 - sdf.surface_cells.max(0))
        if margin.min() < 3:
            raise ValueError(f'the SDF grid leaves {int(margin.min())} cells between the '
                             'surface and its border; the torch label backend needs 3 (use '
                             "backend='numpy': --label-backend numpy)")
        self.device = torch.device(device)
        # points per lookup on the CPU: its temporaries stay in the cache (2x faster per point
        # than half a million at once); a GPU takes every point in one launch
        self.block = LOOKUP_BLOCK if self.device.type == 'cpu' else None
        self.dims = [int(n) for n in sdf.dims]
        self.last = torch.as_tensor(sdf.dims - 1, dtype=F64, device=self.device)[:, None]
        self.inv_res, self.res = sdf._inv_res, sdf.resolution
        self.shift = torch.as_tensor(sdf._grid_shift, dtype=F64, device=self.device)
        self.origin = torch.as_tensor(sdf.origin, dtype=F64, device=self.device)
        self.thresh = sdf.surface_thresh
        near, worst = field_lipschitz(sdf)
        self.set_lipschitz(near, worst)
        nx, ny, nz = self.dims
        padded = np.zeros((nx + 1, ny + 1, nz + 1))
        padded[:-1, :-1, :-1] = sdf.data
        self.padded = torch.as_tensor(padded.reshape(-1), dtype=F64, device=self.device)
        self.strides = ((ny + 1) * (nz + 1), nz + 1)
        self.offsets = torch.tensor([[i * self.strides[0] + j * self.strides[1] + k]
                                     for i in (0, 1) for j in (0, 1) for k in (0, 1)],
                                    device=self.device)
        self.size = torch.as_tensor(sdf.dims, dtype=F64, device=self.device)[:, None]
        self.zero = torch.zeros_like(self.size)
        self.one = torch.ones((), dtype=F64, device=self.device)
        # the CPU checks on the host whether a block has points off the grid (no sync to
        # avoid); a GPU computes the stand-in for every point, without a sync
        self.host_checks = HOST_CHECKS and self.device.type == 'cpu'
        steps = torch.tensor([-1.5, 0.0, 1.5], dtype=F64)
        d = torch.stack(torch.meshgrid(steps, steps, steps, indexing='ij'), -1).reshape(-1, 3)
        norm = d.norm(dim=1, keepdim=True)
        self.probes = torch.where(norm > 0, 1.5 * d / norm.clamp_min(1e-300), d).to(self.device)

    def set_lipschitz(self, near: np.ndarray, worst: np.ndarray) -> None:
        """The bounds of :func:`field_lipschitz`: per cell, one row of 3 (a single gather),
        and over the grid."""
        self.near_rows = torch.as_tensor(near.reshape(3, -1).T.copy(), dtype=F64,
                                         device=self.device)
        shape = near.shape[1:]
        self.near_low = torch.zeros(3, dtype=F64, device=self.device)
        self.near_high = torch.tensor(shape, dtype=F64, device=self.device) - 1
        self.near_strides = (shape[1] * shape[2], shape[2])
        self.worst = torch.as_tensor(worst, dtype=F64, device=self.device)

    def to_grid(self, p: torch.Tensor) -> torch.Tensor:
        return p.to(torch.float32).to(F64) * self.inv_res + self.shift

    def to_object(self, g: torch.Tensor) -> torch.Tensor:
        return g.to(torch.float32).to(F64) * self.res + self.origin

    def __call__(self, grid: torch.Tensor) -> torch.Tensor:
        """Signed distances at grid coordinates (..., 3): ``SignedDistanceField.__call__``'s
        float operations in its order. The 8 corners are one gather from the grid padded with
        a layer of zeros (a corner past the last node is dexnet's zero, its weight exactly 0);
        the weights are ``1 - |base - c|`` without the abs (``base <= c < base + 1``)."""
        g = grid.reshape(-1, 3)
        if self.block and len(g) > self.block:
            values = [self._values(g[s:s + self.block]) for s in range(0, len(g), self.block)]
            return torch.cat(values).reshape(grid.shape[:-1])
        return self._values(g).reshape(grid.shape[:-1])

    def _values(self, g: torch.Tensor) -> torch.Tensor:
        g = g.T.contiguous()  # (3, K): each axis contiguous
        k = g.shape[1]
        c = torch.clamp(g, self.zero, self.last)  # off the grid: a node, its value replaced
        base = torch.floor(c)
        flat = torch.add(base[2], base[0], alpha=self.strides[0])  # integers: exact
        flat = flat.add_(base[1], alpha=self.strides[1]).long()
        values = self.padded.index_select(0, (flat + self.offsets).view(-1)).view(8, k)
        weights = torch.empty((2, 3, k), dtype=F64, device=g.device)  # lower, upper corner
        lower, upper = weights
        torch.sub(self.one, torch.sub(c, base, out=lower), out=lower)
        torch.sub(self.one, torch.add(base, 1, out=upper).sub_(c), out=upper)
        terms = (weights[:, None, 0] * weights[None, :, 1])[:, :, None]
        terms = (terms * weights[None, None, :, 2]).view(8, k).mul_(values)  # x-major
        sd = terms[0] + 0.0  # dexnet's order and its start from +0
        for i in _ORDER[1:]:
            sd += terms[i]
        if self.host_checks:  # the CPU: the stand-in only where a point is off the grid
            if torch.equal(c, g):
                return sd
            rows = torch.nonzero(self._off_grid(g))[:, 0]
            sd[rows] = self._stand_in(g[:, rows])
            return sd
        return torch.where(self._off_grid(g), self._stand_in(g), sd)

    def _off_grid(self, g: torch.Tensor) -> torch.Tensor:
        return ((g < 0) | (g >= self.size)).any(0)

    def _stand_in(self, g: torch.Tensor) -> torch.Tensor:
        """the value off the grid: the distance to it plus two surface bands"""
        off = torch.where(g < 0, -g, torch.clamp_min(g - self.last, 0.0))
        off = off * off
        return torch.sqrt(off[0] + off[1] + off[2]) * self.res + 2 * self.thresh

    def bound(self, grid: torch.Tensor, a: torch.Tensor, far: torch.Tensor,
              step: torch.Tensor) -> torch.Tensor:
        """the numpy backend's ``_step_bound``: the field's rate of change along axes whose
        absolute values are ``a`` (K, 3); ``far``: the rate over the whole grid, ``rate(a)``."""
        cell = torch.clamp(torch.floor(grid), self.near_low, self.near_high)
        flat = torch.add(cell[:, 2], cell[:, 0], alpha=self.near_strides[0])  # integers: exact
        flat = flat.add_(cell[:, 1], alpha=self.near_strides[1]).long()
        return torch.where(step <= self.res, _dot(a, self.near_rows.index_select(0, flat)), far)

    def rate(self, a: torch.Tensor) -> torch.Tensor:
        """the bound over the whole grid along axes whose absolute values are ``a`` (K, 3)"""
        return _dot(a, self.worst[None])

    def normals(self, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """dexnet's ``surface_normal`` at (K, 3) grid points: (outward normals, valid); on the
        CPU ``NORMAL_BLOCK`` points at a time (the 27 probes' temporaries stay in the cache)."""
        if self.block and len(grid) > NORMAL_BLOCK:
            parts = [self._normals(grid[s:s + NORMAL_BLOCK])
                     for s in range(0, len(grid), NORMAL_BLOCK)]
            return torch.cat([n for n, _ in parts]), torch.cat([v for _, v in parts])
        return self._normals(grid)

    def _normals(self, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        here = self(grid)
        valid = here.abs() < self.thresh
        probes = grid[:, None, :] + self.probes[None]
        around = self(grid[:, None, :] + self.probes[None, _OFF_CENTRE])  # the centre: ``here``
        on = (torch.cat([around[:, :13], here[:, None], around[:, 13:]], 1).abs() <
              self.thresh)[..., None]
        count = on.sum(1).clamp_min(1)
        mean = torch.where(on, probes, 0.0).sum(1) / count
        centred = torch.where(on, probes - mean[:, None, :], 0.0)
        scatter = centred.transpose(1, 2) @ centred
        normals = torch.linalg.eigh(scatter)[1][:, :, 0].contiguous()
        flip = self(grid + normals * 0.01) < here
        normals = torch.where(flip[:, None], -normals, normals)
        return torch.where(valid[:, None], normals, torch.nan), valid


def trace(field: BatchedField, starts: torch.Tensor, axes: torch.Tensor, limit: float,
          value: Optional[torch.Tensor] = None, within: Optional[Callable] = None
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """The sphere tracing of :func:`.object_labels.exit_distance` (steps the Lipschitz bound
    does not cover are sampled), the same operations on tensors; rays leave the batch as they
    finish. Returns the bracket (lo, hi) of the exit that the bisection narrows: hi NaN for a
    ray still inside at ``limit``, 0 for a start on or outside the surface. ``value``: the
    field at the starts, when known; ``within``: the test of the distances a ray goes on
    from (``t <= limit``; a caller that rejects every exit beyond a shorter one stops there)."""
    within = (lambda t: t <= limit) if within is None else within
    value = field(field.to_grid(starts)) if value is None else value
    lo = torch.zeros(len(starts), dtype=F64, device=starts.device)
    hi = torch.full_like(lo, torch.nan)
    hi[value >= 0] = 0.0
    idx = torch.nonzero(value < 0)[:, 0]
    # the rays still inside, compacted every step: start, axis, distance, value there and its
    # grid position (where the next step's bound is read)
    s, u, v = starts[idx], axes[idx], value[idx]
    a = u.abs()
    far = field.rate(a)
    t0 = torch.zeros_like(v)
    g0 = field.to_grid(s + t0[:, None] * u)
    min_step = 0.2 * field.res
    frac = torch.arange(1, SUBSTEPS, dtype=F64, device=starts.device) / SUBSTEPS
    while len(idx):
        step = torch.clamp_min(0.9 * -v, min_step)
        t1 = t0 + step
        g1 = field.to_grid(s + t1[:, None] * u)
        v1 = field(g1)
        bound = field.bound(g0, a, far, step)
        check = torch.nonzero((-v - v1) < bound * step)[:, 0]
        if len(check):
            c0, c1, cb = t0[check, None], t1[check, None], bound[check]
            ts = c0 + step[check, None] * frac
            reach0, reach1 = -v[check] / cb, -v1[check] / cb
            gap = ~((ts - c0 < reach0[:, None]) | (c1 - ts < reach1[:, None]))
            r, k = torch.nonzero(gap, as_tuple=True)
            sub = torch.zeros(ts.shape, dtype=torch.bool, device=ts.device)
            ray = check[r]
            sub[r, k] = field(field.to_grid(s[ray] + ts[r, k, None] * u[ray])) >= 0
            crossed = sub.any(1)
            first = torch.argmax(sub.to(torch.uint8), 1)
            rows = check[crossed]
            fc = first[crossed]
            tc = ts[crossed]
            v1[rows] = 0.0
            t1[rows] = tc.gather(1, fc[:, None])[:, 0]
            t0[rows] = torch.where(fc > 0, tc.gather(1, (fc - 1).clamp_min(0)[:, None])[:, 0],
                                   t0[rows])
        out = v1 >= 0
        done = torch.nonzero(out)[:, 0]
        lo[idx[done]], hi[idx[done]] = t0[done], t1[done]
        go = torch.nonzero(~out & within(t1))[:, 0]
        idx, s, u, a, far = idx[go], s[go], u[go], a[go], far[go]
        t0, v, g0 = t1[go], v1[go], g1[go]
    return lo, hi


def bisect(field: BatchedField, starts: torch.Tensor, axes: torch.Tensor, lo: torch.Tensor,
           hi: torch.Tensor, bisections: int = 12) -> torch.Tensor:
    """The exit in brackets of :func:`trace` (hi > 0), halved ``bisections`` times."""
    for _ in range(bisections):
        mid = (lo + hi) / 2
        out = field(field.to_grid(starts + mid[:, None] * axes)) >= 0
        hi, lo = torch.where(out, mid, hi), torch.where(out, lo, mid)
    return hi


def exit_distance(field: BatchedField, starts: torch.Tensor, axes: torch.Tensor, limit: float,
                  bisections: int = 12) -> torch.Tensor:
    """:func:`.object_labels.exit_distance`: :func:`trace`, then :func:`bisect`."""
    lo, hi = trace(field, starts, axes, limit)
    hit = torch.nonzero(torch.isfinite(hi) & (hi > 0))[:, 0]
    hi[hit] = bisect(field, starts[hit], axes[hit], lo[hit], hi[hit], bisections)
    return torch.where(hi > limit, torch.nan, hi)


def jaw_widths(field: BatchedField, centres: torch.Tensor, axes: torch.Tensor,
               value: torch.Tensor, limit: float, clearance: float, max_width: float):
    """The numpy path's width, ``float32(2 * max(exit(+u), exit(-u)) + 2 * clearance)``, and
    whether it is finite and fits ``max_width``, with the bisections the answer needs: the
    fit is monotone in each exit and every exit lies in its traced bracket, so a ray stops
    where its width no longer fits, a bracket whose near end is already too wide ends the
    cell (before the other side is traced), and only the side whose bracket lies beyond the
    other's is bisected."""
    def fits(h):
        return (h <= limit) & ((2 * h + 2 * clearance).to(torch.float32).to(F64) <= max_width)
    lo1, hi1 = trace(field, centres, axes, limit, value, fits)
    rows = torch.nonzero(fits(lo1) & ~torch.isnan(hi1))[:, 0]
    lo2, hi2 = trace(field, centres[rows], -axes[rows], limit, value[rows], fits)
    keep = fits(lo2) & ~torch.isnan(hi2)
    rows, lo2, hi2 = rows[keep], lo2[keep], hi2[keep]
    lo1, hi1 = lo1[rows], hi1[rows]
    need1, need2 = ~(lo2 >= hi1) & (hi1 > 0), ~(lo1 >= hi2) & (hi2 > 0)
    r1, r2 = torch.nonzero(need1)[:, 0], torch.nonzero(need2)[:, 0]
    both = torch.cat([r1, r2])
    sign = torch.cat([torch.ones_like(r1), -torch.ones_like(r2)]).to(F64)[:, None]
    exits = bisect(field, centres[rows[both]], axes[rows[both]] * sign,
                   torch.cat([lo1[r1], lo2[r2]]), torch.cat([hi1[r1], hi2[r2]]))
    hi1[r1], hi2[r2] = exits[:len(r1)], exits[len(r1):]
    half = torch.maximum(hi1, hi2)
    w = (2 * half + 2 * clearance).to(torch.float32)
    ok = torch.zeros(len(centres), dtype=torch.bool, device=centres.device)
    ok[rows] = fits(half)
    width = torch.zeros(len(centres), dtype=torch.float32, device=centres.device)
    width[rows] = w
    return width, ok


def _zero_crossing(x1, y1, x2, y2, x3, y3, eps: float = 1.0):
    """dexnet's ``find_zero_crossing_quadratic`` (mmgrasp.geometry.contacts), closed form."""
    v = x2 - x1
    v = v / _norm(v)[:, None]
    nonzero = v != 0
    first = torch.argmax(nonzero.to(torch.uint8), dim=1, keepdim=True)
    has_axis = nonzero.gather(1, first)[:, 0]
    vf = torch.where(has_axis, v.gather(1, first)[:, 0], 1.0)
    t2 = (x2 - x1).gather(1, first)[:, 0] / vf
    t3 = (x3 - x1).gather(1, first)[:, 0] / vf
    det = t2 * t2 * t3 - t3 * t3 * t2
    ok = has_axis & (det.abs() > 0)
    det = torch.where(ok, det, 1.0)
    a = ((y2 - y1) * t3 - (y3 - y1) * t2) / det
    b = (t2 * t2 * (y3 - y1) - t3 * t3 * (y2 - y1)) / det
    c = y1
    a, b = torch.where(ok, a, 0.0), torch.where(ok, b, 0.0)
    ok &= torch.isfinite(a) & torch.isfinite(b) & torch.isfinite(c)
    quad = ok & (a != 0)
    safe_a = torch.where(quad, a, 1.0)
    p = -b / (2 * safe_a)
    disc = p * p - c / safe_a
    real = quad & (disc >= 0)
    root = torch.sqrt(torch.where(real, disc, 0.0))
    big = p + torch.where(p >= 0, root, -root)  # LAPACK's first eigenvalue: the larger one
    small = torch.where(big != 0, (c / safe_a) / torch.where(big != 0, big, 1.0), 0.0)
    tail = quad & (c == 0)
    big = torch.where(tail, -b / safe_a, big)
    small = torch.where(tail, 0.0, small)
    real = real | tail

    def admissible(r):
        return real & (r >= 0) & (r <= 10)
    t_zc = torch.where(admissible(small), small, torch.where(admissible(big), big,
                                                             -b / torch.where(a != 0, 2 * a,
                                                                              1.0)))
    ok &= (a.abs() >= 1e-10) & (t_zc >= -eps) & (t_zc <= eps)
    return x1 + t_zc[:, None] * v, ok


def find_contacts(field: BatchedField, start, direction, step, half, counts):
    """dexnet's ``find_contact`` along K lines of action (samples ``start + t * direction``,
    t = i * step, the last exactly ``half``): (found (K,), zero crossing in grid coordinates).
    Samples are evaluated ``WINDOW`` at a time from the open jaw, each once: the samples the
    Lipschitz bound keeps off the surface band are skipped (after the first sample and after
    each window), and the one or two samples before a window that a candidate's quadratic fit
    reads are carried from the window before, or evaluated for that candidate alone."""
    k = len(start)
    dev = start.device
    found = torch.zeros(k, dtype=torch.bool, device=dev)
    point = torch.zeros(k, 3, dtype=F64, device=dev)
    rate = field.rate(direction.abs())

    def skip(value, rows):
        """samples after the one of ``value`` that the bound keeps off the band"""
        n = torch.floor((value - field.thresh) / (rate[rows] * step[rows])) - 1
        return torch.where(torch.isfinite(n), n.clamp(0, 1 << 20), 0).long()
    first_value = field(field.to_grid(start + (0 * step)[:, None] * direction))
    j0 = skip(first_value, slice(None))
    carry = torch.full((k, 2), torch.nan, dtype=F64, device=dev)  # samples j0 - 2, j0 - 1
    carry[:, 1] = torch.where(j0 == 1, first_value, torch.nan)
    idx = torch.nonzero(j0 < counts)[:, 0]
    offsets = torch.arange(-2, WINDOW + 1, device=dev)
    while len(idx):
        n = counts[idx]
        cols = j0[idx, None] + offsets  # (m, WINDOW + 3): two before, one after
        inside = (cols >= 0) & (cols < n[:, None])
        colc = cols.clamp(0)
        t = torch.where(colc == n[:, None] - 1, half[idx, None], colc * step[idx, None])
        # the window and the sample after it: the two before are carried or looked up alone
        grid = field.to_grid(start[idx, None] + t[:, 2:, None] * direction[idx, None])
        values = torch.cat([carry[idx], field(grid)], 1)

        def position(rows, at):
            """the grid positions of samples ``at`` (columns of ``t``) of rows ``rows``"""
            out = grid[rows, (at - 2).clamp_min(0)]
            early = torch.nonzero(at < 2)[:, 0]
            if len(early):
                e, ray = rows[early], idx[rows[early]]
                out[early] = field.to_grid(start[ray] + t[e, at[early], None] * direction[ray])
            return out
        values = torch.where(inside, values, torch.nan)
        cand = inside[:, 2:-1] & (values[:, 2:-1].abs() < field.thresh)
        c = cols[:, 2:-1]
        last, first = c == n[:, None] - 1, c == 0
        # a candidate whose next sample is nearer the surface is vetoed before its fit
        cand &= last | ~(values[:, 3:].abs() < values[:, 2:-1].abs())
        rel = torch.arange(2, WINDOW + 2, device=dev).expand_as(c)
        i0 = torch.where(first, rel, torch.where(last, rel - 2, rel - 1))
        i1 = torch.where(first, rel + 1, torch.where(last, rel - 1, rel))
        i2 = torch.where(first, rel + 2, torch.where(last, rel, rel + 1))
        r, col = torch.nonzero(cand, as_tuple=True)
        accepted = torch.zeros_like(cand)
        which = torch.zeros(cand.shape, dtype=torch.long, device=dev)  # the candidate there
        pts = point[:0]
        if len(r):
            a0, a1, a2 = i0[r, col], i1[r, col], i2[r, col]
            x0, x1 = position(r, a0), position(r, a1)
            y0, y1 = values[r, a0], values[r, a1]
            for x, y in ((x0, y0), (x1, y1)):  # a sample before the window, not carried
                miss = torch.nonzero(torch.isnan(y))[:, 0]
                y[miss] = field(x[miss])
            pts, ok = _zero_crossing(x0, y0, x1, y1, position(r, a2), values[r, a2])
            accepted[r, col] = ok
            which[r, col] = torch.arange(len(r), device=dev)
        hit = accepted.any(1)
        at = torch.argmax(accepted.to(torch.uint8), dim=1)
        found[idx[hit]] = True
        point[idx[hit]] = pts[which[hit, at[hit]]]
        jump = skip(values[:, WINDOW + 2], idx)  # from the sample at the next window's start
        j0[idx] += WINDOW + jump
        carry[idx] = torch.where((jump == 0)[:, None], values[:, WINDOW:WINDOW + 2], torch.nan)
        idx = idx[~hit & (j0[idx] < n)]
    return found, point


def close_jaws(field: BatchedField, centers, axes, widths, cones: torch.Tensor,
               samples_per_grid: int = 2):
    """:func:`mmgrasp.geometry.close_jaws` on tensors, returning the contacts' antipodal
    angle (NaN where a contact or normal is not found; the second normal is fitted only where
    the first contact's angle is within the widest cone ``cones[-1]``)."""
    k = len(centers)
    width_grid = widths * (1.0 / field.res)
    counts = (samples_per_grid * width_grid / 2).long().clamp_min(3)
    half = widths / 2 - 0.0 / 2
    step = half / (counts - 1)
    points, in_dirs = [], []
    found = torch.ones(k, dtype=torch.bool, device=centers.device)
    for sign in (-1.0, 1.0):
        start = centers + sign * (widths / 2.0)[:, None] * axes
        direction = -sign * axes
        rows = torch.nonzero(found)[:, 0]
        f, zc = find_contacts(field, start[rows], direction[rows], step[rows], half[rows],
                              counts[rows])
        found[rows[~f]] = False
        point = torch.full((k, 3), torch.nan, dtype=F64, device=centers.device)
        point[rows] = field.to_object(zc)
        first = field.to_grid(start)
        end = field.to_grid(start + half[:, None] * direction)
        in_dir = (end - first) / _norm(end - first)[:, None]
        points.append(point)
        in_dirs.append(in_dir.to(torch.float32).to(F64))
    alpha = torch.full((k,), torch.nan, dtype=F64, device=centers.device)
    rows = torch.nonzero(found)[:, 0]
    angles = []
    for jaw in (0, 1):
        q, other = points[jaw][rows], points[1 - jaw][rows]
        normal, valid = field.normals(field.to_grid(q))
        flip = _dot(in_dirs[jaw][rows], normal) > 0
        normal = torch.where(flip[:, None], -normal, normal).to(torch.float32).to(F64)
        angle = _angle(q, normal, other)
        angle = torch.where(valid, angle, torch.nan)
        if jaw == 0:  # the first contact already outside every cone: the grasp fails
            keep = ~(angle > cones[-1]) & ~torch.isnan(angle)
            rows, angle = rows[keep], angle[keep]
        angles.append(angle)
    alpha[rows] = torch.maximum(angles[0], angles[1])
    same = (points[0][rows] == points[1][rows]).all(1)
    alpha[rows[same]] = torch.nan
    return alpha


def _angle(point, normal, other):
    """antipodal_angles' angle at one contact (mmgrasp.geometry.force_closure)."""
    diff = other - point
    n = -normal
    proj = _dot(n, diff).abs() / _norm(n)
    cosine = proj / _norm(diff)
    return torch.where(cosine > 1, 0.0, torch.arccos(torch.clamp_max(cosine, 1.0)))


def min_friction(alpha: torch.Tensor, coefficients=MU_GRID) -> torch.Tensor:
    """force_closure_min_friction's walk down the coefficients, from the antipodal angle."""
    score = torch.full_like(alpha, -1.0)
    alive = ~torch.isnan(alpha)
    for mu in np.sort(np.asarray(coefficients, np.float64))[::-1]:
        alive &= ~(alpha > float(np.arctan(mu)))
        score = torch.where(alive, round(float(mu), 2), score)
    return score


def self_collision(mu, width, points, gripper: Gripper, model_points, device,
                   chunk_bytes: int = 1 << 22) -> np.ndarray:
    """``points_collision`` (the evaluator's point test of fingers and base against the model
    points) for the cells with μ > 0, on tensors, cells chunked by ``chunk_bytes``."""
    out = np.zeros(mu.shape, bool)
    cells = np.argwhere(mu > 0)
    obstacle = torch.as_tensor(np.asarray(model_points, np.float64).reshape(-1, 3),
                               device=device)
    if not len(cells) or not len(obstacle):
        return out
    v, a, _ = gripper.grid
    rot = torch.as_tensor(grasp_frames(v, a, gripper.angles()), device=device)
    pts = torch.as_tensor(np.asarray(points, np.float64), device=device)
    depths = torch.as_tensor(gripper.depths(), device=device)
    cell = torch.as_tensor(cells, device=device)
    w = torch.as_tensor(width[tuple(cells.T)].astype(np.float64), device=device)
    hit = torch.zeros(len(cells), dtype=torch.bool, device=device)
    step = max(1, chunk_bytes // (8 * 8 * len(obstacle)))
    height, base, finger = gripper.height, gripper.base_depth, gripper.finger_width
    for s in range(0, len(cells), step):
        pi, vi, ai, di = cell[s:s + step].T
        r, t = rot[vi, ai], pts[pi]
        d = [obstacle[None, :, i] - t[:, i, None] for i in range(3)]
        x, y, z = (d[0] * r[:, 0, j, None] + d[1] * r[:, 1, j, None] + d[2] * r[:, 2, j, None]
                   for j in range(3))
        half, depth = (w[s:s + step] / 2)[:, None], depths[di][:, None]
        # the evaluator's tests, folded by |y| and |z| (negation is exact): a finger where
        # half < |y| < half + finger and -base < x < depth, the base where |y| < half + finger
        # and -(base + finger) < x < -base, both where |z| < height / 2
        ay = y.abs()
        finger_or_base = ((x > -base) & (x < depth) & (ay > half)) | \
            ((x > -(base + finger)) & (x < -base))
        hit[s:s + step] = ((z.abs() < height / 2) & (ay < half + finger) & finger_or_base).any(1)
    out[tuple(cells.T)] = hit.cpu().numpy()
    return out


def cell_centres(approach: torch.Tensor, depths: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Jaw centres (n, V, D, 3) of label points p (n, 3): ``label_grasps``' sum."""
    return approach[None, :, None, :] * depths[:, None] + p[:, None, None, :]


def batched_object_grasp_labels(sdf: SignedDistanceField, points: np.ndarray,
                                model_points: np.ndarray, gripper: Gripper, clearance: float,
                                max_cells: int, progress: Optional[Callable[[int, int], None]],
                                device=None) -> dict:
    """:func:`.object_labels.object_grasp_labels` with ``backend='torch'`` (same arguments and
    returns)."""
    device = default_device() if device is None else torch.device(device)
    field = BatchedField(sdf, device)
    points = np.asarray(points, np.float32).reshape(-1, 3)
    v, a, d = gripper.grid
    rot = grasp_frames(v, a, gripper.angles())
    axes = torch.as_tensor(jaw_axes(rot), device=device)  # (V, A, 3)
    approach = torch.as_tensor(rot[:, 0, :, 0], device=device)  # (V, 3)
    depths_np = gripper.depths()
    depths = torch.as_tensor(depths_np, device=device)
    cones = torch.as_tensor(np.arctan(np.sort(MU_GRID)), device=device)
    shape = (len(points), v, a, d)
    mu = np.full(shape, -1, np.float32)
    width = np.zeros(shape, np.float32)
    limit = gripper.max_width / 2
    step = max(1, max_cells // max(v * a * d, 1))
    for s in range(0, len(points), step):
        p = torch.as_tensor(points[s:s + step], device=device).to(F64)
        centres = cell_centres(approach, depths, p)
        values = field(field.to_grid(centres))
        pi, vi, di = torch.nonzero(values < 0, as_tuple=True)
        c = centres[pi, vi, di].repeat_interleave(a, 0)  # angles fastest
        u = axes[vi].reshape(-1, 3)
        w, ok = jaw_widths(field, c, u, values[pi, vi, di].repeat_interleave(a, 0), limit,
                           clearance, gripper.max_width)
        rows = torch.nonzero(ok)[:, 0]
        cell_mu = torch.full((len(c),), -1.0, dtype=F64, device=device)
        alpha = close_jaws(field, c[rows], u[rows], w[rows].to(F64), cones)
        cell_mu[rows] = min_friction(alpha)
        index = (pi.cpu().numpy() + s, vi.cpu().numpy(), slice(None), di.cpu().numpy())
        mu[index] = cell_mu.reshape(-1, a).cpu().numpy()
        width[index] = torch.where(ok, w, 0).reshape(-1, a).cpu().numpy()
        if progress is not None:
            progress(min(s + step, len(points)), len(points))
    collision = self_collision(mu, width, points.astype(np.float64), gripper, model_points,
                               device)
    offsets = np.empty(shape + (3,), np.float32)
    offsets[..., 0] = gripper.angles().astype(np.float32)[:, None]
    offsets[..., 1] = depths_np.astype(np.float32)
    offsets[..., 2] = width
    return dict(points=points, offsets=offsets, collision=collision, scores=mu)
