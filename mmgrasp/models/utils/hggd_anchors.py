"""HGGD's out-of-plane (γ, β) anchors and their "non-uniform" shift (THU-VCLab/HGGD
``train_graspnet.py``, ``dataset/utils.py`` ``shift_anchors`` / ``iter_anchors``).

Seven anchors per angle, in units of π/2, start at the bin midpoints of linspace(−1, 1, 8)
(computed in float32, as the reference). While shifting is on (the first epochs; set by
``HGGDAnchorShiftHook``), the (γ, β) of every label matched to a region are binned by the
current anchors' midpoints; once more than ``threshold`` labels are in, one k-means step
moves each anchor halfway to sum / (count + 1) of its bin (an empty bin keeps its anchor) and
the count starts again. The bins only change at a shift, so counting per bin as labels come
gives the reference's batch computation. Everything stays on the device (the shift is a
``torch.where``, no host read). The anchors are float64 buffers, saved in the checkpoint.
"""
import torch
from torch import Tensor, nn


def initial_anchors(num: int = 7) -> Tensor:
    """Bin midpoints of linspace(−1, 1, num + 1), float32 arithmetic, as float64."""
    edges = torch.linspace(-1, 1, num + 1)
    return ((edges[1:] + edges[:-1]) / 2).double()


class HGGDAnchors(nn.Module):
    """``gamma`` and ``beta`` (num,) float64 buffers and the shift's running bin counts."""

    def __init__(self, num: int = 7, threshold: float = 1e6):
        super().__init__()
        self.num, self.threshold = num, threshold
        self.register_buffer('gamma', initial_anchors(num))
        self.register_buffer('beta', initial_anchors(num))
        self.register_buffer('counts', torch.zeros(2, num, dtype=torch.float64), persistent=False)
        self.register_buffer('sums', torch.zeros(2, num, dtype=torch.float64), persistent=False)
        self.register_buffer('total', torch.zeros((), dtype=torch.float64), persistent=False)
        self.shift_enabled = False

    def reset(self) -> None:
        """Forget the labels counted so far (the reference starts each epoch afresh)."""
        self.counts.zero_()
        self.sums.zero_()
        self.total.zero_()

    @torch.no_grad()
    def update(self, gammas: Tensor, betas: Tensor, valid: Tensor) -> None:
        """Count the matched labels' γ, β (rad; any shape, ``valid`` marks the real ones) and
        shift where more than ``threshold`` are in. Does nothing unless ``shift_enabled``."""
        if not self.shift_enabled:
            return
        # the reference's float32 arithmetic: angle / π · 2, clipped to ±(1 − 1e-6)
        angles = torch.stack([gammas.reshape(-1), betas.reshape(-1)]).float()
        angles = (angles / torch.pi * 2).clamp(-1 + 1e-6, 1 - 1e-6).double()
        weight = valid.reshape(1, -1).to(torch.float64).expand(2, -1)
        anchors = torch.stack([self.gamma, self.beta])
        bins = torch.searchsorted(((anchors[:, 1:] + anchors[:, :-1]) / 2).contiguous(),
                                  angles.contiguous())
        self.counts.scatter_add_(1, bins, weight)
        self.sums.scatter_add_(1, bins, angles * weight)
        self.total.add_(weight[0].sum())
        moved = torch.where(self.counts > 0, self.sums / (self.counts + 1), anchors)
        shift = self.total > self.threshold
        new = torch.where(shift, (moved + anchors) / 2, anchors)
        self.gamma.copy_(new[0])
        self.beta.copy_(new[1])
        for buffer in (self.counts, self.sums, self.total):
            buffer.copy_(torch.where(shift, torch.zeros_like(buffer), buffer))

    def eulers(self) -> Tensor:
        """(num², 2) (γ, β) in rad of anchor index i: γ[i % num], β[i // num], rounded to
        float32 as the reference's label step builds them."""
        index = torch.arange(self.num ** 2, device=self.gamma.device)
        return torch.stack([self.gamma[index % self.num], self.beta[index // self.num]],
                           1).mul(torch.pi / 2).float()
