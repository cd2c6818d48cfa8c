"""FineGraspUNet (FineGrasp's MinkUNet): parameter for parameter against the reference's state
dict (tests/data/reference_state_dicts/finegrasp.json, listed from the instantiated reference
model), the first-point voxel rule against a numpy de-duplication, and every option's effect."""
import json
import math
import os

import numpy as np
import pytest
import torch

from _sparse_inputs import table_and_hemisphere
from mmgrasp.models.backbones import FineGraspUNet, SparseUNet14
from mmgrasp.registry import MODELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'finegrasp.json')
SMALL = dict(channels=(8, 16, 16, 16, 16, 8, 8, 8), out_channels=12, stem_channels=8)


def _with_normals(points: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """xyz + random unit 'normals': features that differ between points of one voxel."""
    gen = torch.Generator().manual_seed(seed)
    normals = torch.randn(points.shape, generator=gen)
    return torch.cat([points, normals / normals.norm(dim=-1, keepdim=True)], dim=-1)


def _first_points(points: np.ndarray, voxel_size: float) -> tuple:
    """numpy: per voxel, the index of its lowest-index point (ME's ``insert_and_map``: rows are
    inserted in order and a cell's first insert wins), and every point's voxel's first point."""
    cells = np.floor(points / voxel_size).astype(np.int64)
    first_of, first = {}, np.empty(len(points), np.int64)
    for i, cell in enumerate(map(tuple, cells)):
        first[i] = first_of.setdefault(cell, i)
    return np.array(sorted(first_of.values())), first


def _reference_name(key: str, shape: tuple) -> tuple:
    """mmgrasp backbone key and shape -> the reference's (minkunet.py's module names; ME's
    ``kernel`` (k³, in, out), (in, out) for a stride-1 1³ conv; ``bias`` (1, out);
    MinkowskiBatchNorm's ``.bn``), written here from the reference, not from the converter."""
    modules = {'stem.0': 'conv0p1s1', 'stem.1': 'bn0', 'head': 'final'}
    for i in range(4):
        modules.update({f'down.{i}.0': f'conv{i + 1}p{2 ** i}s2', f'down.{i}.1': f'bn{i + 1}',
                        f'down.{i}.3': f'block{i + 1}',
                        f'up_convs.{i}': f'convtr{i + 4}p{2 ** (4 - i)}s2',
                        f'up_norms.{i}.0': f'bntr{i + 4}', f'up_blocks.{i}': f'block{i + 5}'})
    module, tail = key.rsplit('.', 1)
    prefix = max((m for m in modules if module == m or module.startswith(m + '.')), key=len)
    name = modules[prefix] + module[len(prefix):]
    if len(shape) == 3:  # a sparse conv weight
        return f'{name}.kernel', shape[1:] if shape[0] == 1 else shape
    if name == 'final' and tail == 'bias':
        return 'final.bias', (1,) + shape
    return f'{name}.bn.{tail}', shape


def test_parameters_equal_the_reference_backbone():
    """Every reference backbone tensor under the reference's name with its shape
    and dtype: 194 tensors, 14 658 816 parameters (of the whole model's 388 and 19 145 441)."""
    table = json.load(open(TABLE))
    shapes = table['state_dict']
    stats = ('running_mean', 'running_var', 'num_batches_tracked')
    assert (table['tensors'], table['parameters']) == (len(shapes), sum(
        math.prod(s) for k, s in shapes.items() if not k.endswith(stats))) == (388, 19145441)
    reference = {k[len('backbone.'):]: tuple(s) for k, s in shapes.items()
                 if k.startswith('backbone.')}
    net = FineGraspUNet()
    ours = dict(_reference_name(k, tuple(v.shape)) for k, v in net.state_dict().items())
    assert len(ours) == len(net.state_dict()) and ours == reference  # (up-path order differs)
    dtypes = {_reference_name(k, tuple(v.shape))[0]: str(v.dtype).replace('torch.', '')
              for k, v in net.state_dict().items()}
    assert dtypes == {k[len('backbone.'):]: v for k, v in table['dtypes'].items()
                      if k.startswith('backbone.')}
    params = sum(math.prod(s) for k, s in reference.items() if not k.endswith(stats))
    assert sum(p.numel() for p in net.parameters()) == params == 14658816


def test_defaults_are_the_reference_minkunet():
    net = MODELS.build(dict(type='FineGraspUNet'))
    assert isinstance(net, SparseUNet14)
    assert (net.in_channels, net.out_channels, net.voxel_size, net.voxel_reduce) == \
        (6, 512, 0.005, 'first')
    # conv0p1s1 (125, 6, 32); conv1p1s2 32 -> 32; block1 32 -> 32 (no projection)
    assert tuple(net.stem[0].weight.shape) == (125, 6, 32)
    assert tuple(net.down[0][0].weight.shape) == (8, 32, 32)
    assert net.down[0][3][0].downsample is None
    # PLANES: encoder 32, 64, 128, 256; decoder 192 x 4; skips 128, 64, 32 and the stem's 32
    assert [s[3][0].conv2.out_channels for s in net.down] == [32, 64, 128, 256]
    assert [b[0].conv1.in_channels for b in net.up_blocks] == [320, 256, 224, 224]
    assert [c.out_channels for c in net.up_convs] == [192] * 4
    assert tuple(net.head.weight.shape) == (1, 192, 512) and net.head.bias.shape == (512,)
    assert [len(s[3]) for s in net.down] + [len(b) for b in net.up_blocks] == [1] * 8


def test_first_point_voxels_equal_a_numpy_deduplication():
    """voxel_reduce='first': every point gets the output of its voxel's first point, i.e. the
    network's output on the cloud of first points alone (one point per voxel, where no rule
    has anything to reduce)."""
    torch.manual_seed(0)
    net = FineGraspUNet(**SMALL).eval()
    points = table_and_hemisphere(batch=1, n=1500)
    feats = _with_normals(points)
    keep, first = _first_points(points[0].numpy(), net.voxel_size)
    assert len(keep) < 1400  # many voxels hold several points
    with torch.no_grad():
        out = net(points, feats)
        alone = net(points[:, keep], feats[:, keep])
    position = {int(p): j for j, p in enumerate(keep)}
    expected = alone[0][:, [position[int(f)] for f in first]]
    torch.testing.assert_close(out[0], expected, rtol=1e-5, atol=1e-6)


def test_mean_voxels_equal_a_numpy_average_and_differ_from_first():
    torch.manual_seed(0)
    first_net = FineGraspUNet(**SMALL).eval()
    mean_net = FineGraspUNet(**SMALL, voxel_reduce='mean').eval()
    mean_net.load_state_dict(first_net.state_dict())
    points = table_and_hemisphere(batch=1, n=1500)
    feats = _with_normals(points)
    keep, first = _first_points(points[0].numpy(), mean_net.voxel_size)
    groups = {}
    for i, f in enumerate(first):
        groups.setdefault(int(f), []).append(i)
    averaged = torch.stack([feats[0, groups[int(k)]].mean(0) for k in keep])[None]
    with torch.no_grad():
        out = mean_net(points, feats)
        alone = mean_net(points[:, keep], averaged)
        firsts = first_net(points, feats)
    position = {int(p): j for j, p in enumerate(keep)}
    expected = alone[0][:, [position[int(f)] for f in first]]
    torch.testing.assert_close(out[0], expected, rtol=1e-4, atol=1e-5)
    assert (out - firsts).abs().max() > 1e-3
    # with constant features (GSNet's ones) the two rules agree
    ones = torch.ones(1, 1500, 6)
    with torch.no_grad():
        torch.testing.assert_close(mean_net(points, ones), first_net(points, ones))


def test_options_change_what_they_should():
    base = FineGraspUNet(**SMALL)
    three = FineGraspUNet(**SMALL, in_channels=3)
    assert tuple(three.stem[0].weight.shape) == (125, 3, 8)
    with torch.no_grad():
        out = three.eval()(table_and_hemisphere(batch=1, n=300))  # feats None: ones
    assert out.shape == (1, 12, 300)
    wide_stem = FineGraspUNet(**dict(SMALL, stem_channels=4))
    assert wide_stem.stem[0].out_channels == 4 and wide_stem.down[0][0].in_channels == 4
    assert wide_stem.down[0][3][0].downsample is not None  # 4 -> channels[0] = 8 projects
    assert wide_stem.up_blocks[3][0].conv1.in_channels == 8 + 4  # the stem is the last skip
    assert base.up_blocks[3][0].conv1.in_channels == 8 + 8
    deep = FineGraspUNet(**SMALL, layers=(2, 1, 1, 3, 1, 1, 1, 2))
    assert [len(s[3]) for s in deep.down] == [2, 1, 1, 3]
    assert [len(b) for b in deep.up_blocks] == [1, 1, 1, 2]
    n_base = sum(p.numel() for p in base.parameters())
    assert sum(p.numel() for p in deep.parameters()) > n_base
    planes = FineGraspUNet(**dict(SMALL, channels=(8, 16, 16, 24, 16, 8, 8, 8)))
    assert planes.down[3][3][0].conv2.out_channels == 24
    assert planes.up_convs[0].in_channels == 24


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="voxel_reduce='max'"):
        FineGraspUNet(**SMALL, voxel_reduce='max')
    net = FineGraspUNet(**SMALL)
    points = table_and_hemisphere(batch=1, n=200)
    with pytest.raises(ValueError, match=r'feats \(1, 200, 3\).*in_channels=6'):
        net(points, torch.ones(1, 200, 3))


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    net = FineGraspUNet(**SMALL)
    points = table_and_hemisphere(batch=2, n=800)
    net(points, _with_normals(points)).square().mean().backward()
    for name, param in net.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
