"""Inputs of the SparseUNet14 tests on CPU and CUDA (a plain module, not a test)."""
import torch

#: A small SparseUNet14: every stage, few channels.
SMALL_UNET = dict(channels=(8, 16, 32, 32, 32, 16, 16, 16), out_channels=24)


def table_and_hemisphere(batch: int = 2, n: int = 3000, seed: int = 0) -> torch.Tensor:
    """(batch, n, 3) clouds: a tilted table patch with a hemisphere on it, ~0.3 m wide, 0.6 m
    from the camera."""
    gen = torch.Generator().manual_seed(seed)
    uv = torch.rand(batch, n // 2, 2, generator=gen) * 0.3 - 0.15
    table = torch.cat([uv, 0.6 + 0.3 * uv[..., 1:]], dim=-1)
    d = torch.randn(batch, n - n // 2, 3, generator=gen)
    d = d / d.norm(dim=-1, keepdim=True)
    d[..., 2] = -d[..., 2].abs()
    return torch.cat([table, torch.tensor([0.0, 0.0, 0.56]) + 0.05 * d], dim=1)
