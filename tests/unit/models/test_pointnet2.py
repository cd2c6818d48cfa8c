"""PointNet++ backbones of GraspNet-baseline and Scale-Balanced-Grasp: shapes, seed indices,
BL's layer sizes, shrinking, gradients."""
import pytest
import torch
from torch import nn

from mmgrasp.models.backbones.pointnet2 import (PointNet2Backbone, PointTransformerLightBackbone,
                                                SetAbstraction)

SMALL = dict(npoints=(128, 64, 32, 16), nsamples=(16, 8, 8, 8), scale=0.25)


def _cloud(batch=2, n=600, channels=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, n, channels, generator=g) * 0.3


def _convs(module):
    return [m for m in module.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d))]


def test_reference_layer_sizes():
    """The default network is BL's: SA MLPs 3→64→64→128, 131→128→128→256, 259→128→128→256
    (twice), FP 512→256→256 (twice), 1024 seeds of 256 channels."""
    net = PointNet2Backbone()
    assert net.out_channels == 256 and net.num_seeds == 1024
    sa = [[(c.in_channels, c.out_channels) for c in _convs(level)] for level in net.sa]
    assert sa == [[(3, 64), (64, 64), (64, 128)], [(131, 128), (128, 128), (128, 256)],
                  [(259, 128), (128, 128), (128, 256)], [(259, 128), (128, 128), (128, 256)]]
    fp = [[(c.in_channels, c.out_channels) for c in _convs(level)] for level in net.fp]
    assert fp == [[(512, 256), (256, 256)], [(512, 256), (256, 256)]]
    assert [(s.npoint, s.radius, s.nsample) for s in net.sa] == [
        (2048, 0.04, 64), (1024, 0.1, 32), (512, 0.2, 16), (256, 0.3, 16)]
    assert all(c.bias is None for c in _convs(net))  # conv + BN, as pointnet2's SharedMLP


def test_shapes_and_seed_indices():
    points = _cloud()
    net = PointNet2Backbone(**SMALL)
    out = net(points)
    assert net.out_channels == 64 and net.num_seeds == 64
    assert out['seed_features'].shape == (2, 64, 64)
    assert out['seed_xyz'].shape == (2, 64, 3)
    assert out['seed_inds'].shape == (2, 64) and out['seed_inds'].dtype == torch.int64
    assert [tuple(i.shape) for i in out['sa_inds']] == [(2, 128), (2, 64), (2, 32), (2, 16)]
    # seed indices point into the input cloud, at the seeds' coordinates
    gathered = torch.gather(points, 1, out['seed_inds'][..., None].expand(-1, -1, 3))
    assert torch.equal(gathered, out['seed_xyz'])
    # FPS of FPS keeps the prefix: BL's fp2_inds = sa1_inds[:, :1024]
    assert torch.equal(out['seed_inds'], out['sa_inds'][0][:, :64])
    assert (out['seed_features'] >= 0).all()  # ReLU after the last FP layer


def test_input_features_and_gradients():
    points = _cloud(channels=6)
    net = PointNet2Backbone(in_channels=3, **SMALL)
    assert _convs(net.sa[0])[0].in_channels == 6
    out = net(points)
    out['seed_features'].square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in net.parameters())


def test_explicit_mlps_and_validation():
    net = PointNet2Backbone(npoints=(64, 32, 16), radii=(0.05, 0.1, 0.2), nsamples=(8, 8, 8),
                            sa_mlps=((8, 16), (16, 32), (32, 32)), fp_mlps=((24, ),))
    out = net(_cloud(n=200))
    assert net.num_seeds == 32 and out['seed_features'].shape == (2, 24, 32)
    with pytest.raises(ValueError, match='one entry per SA level'):
        PointNet2Backbone(npoints=(64, 32))
    with pytest.raises(ValueError, match='decrease'):
        PointNet2Backbone(npoints=(64, 128, 16, 8))
    with pytest.raises(ValueError, match='FP levels'):
        PointNet2Backbone(fp_mlps=((256, 256), ) * 4)


def test_set_abstraction_groups_within_radius():
    points = _cloud(batch=1, n=300)
    sa = SetAbstraction(32, 0.05, 8, 0, (4, ))
    xyz, features, inds = sa(points, None)
    assert torch.equal(xyz, points[0, inds[0]][None])
    assert features.shape == (1, 4, 32)


def test_point_transformer_light():
    points = _cloud()
    net = PointTransformerLightBackbone(npoints=(128, 64), nsamples=(16, 8), k=8, scale=0.25)
    out = net(points)
    assert net.out_channels == 64 and net.num_seeds == 64
    assert out['seed_features'].shape == (2, 64, 64) and out['seed_xyz'].shape == (2, 64, 3)
    inds1, inds2 = out['sa_inds']
    assert torch.equal(out['seed_inds'], torch.gather(inds1, 1, inds2))
    gathered = torch.gather(points, 1, out['seed_inds'][..., None].expand(-1, -1, 3))
    assert torch.equal(gathered, out['seed_xyz'])
    out['seed_features'].square().mean().backward()
    assert all(p.grad is not None for p in net.parameters())
    assert PointTransformerLightBackbone().out_channels == 256
