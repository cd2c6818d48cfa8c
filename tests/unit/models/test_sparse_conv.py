"""Sparse convolution against dense conv3d / conv_transpose3d on a small occupied grid, with
each of the torch backend's algorithms (chunked im2col, in one chunk and in many; per-offset
pairs)."""
import pytest
import torch
import torch.nn.functional as F

from mmgrasp.ops import (SparseConv3d, SparseConvTranspose3d, SparseTensor,
                         hash_coords, sparse_cat, unhash_coords, voxelize)
from mmgrasp.ops import sparse_conv
from mmgrasp.ops.numerics import resolve_conv_algorithm

LAYER = {}  # the algorithm of the layers the tests build (the fixture sets it)


def _conv(*args, **kwargs) -> SparseConv3d:
    return SparseConv3d(*args, **LAYER, **kwargs)


def _up(*args, **kwargs) -> SparseConvTranspose3d:
    return SparseConvTranspose3d(*args, **LAYER, **kwargs)


@pytest.fixture(autouse=True, params=['chunked_im2col', 'chunked_im2col/small', 'pairs'])
def algorithm(request, monkeypatch):
    name, _, chunks = request.param.partition('/')
    monkeypatch.setitem(LAYER, 'algorithm', name)
    if chunks:  # chunks of 3 to 100 rows at these widths: every product in many pieces
        monkeypatch.setattr(sparse_conv, 'IM2COL_CHUNK_ELEMENTS', 300)
    return name

SIZE, SHIFT, C_IN, C_OUT = 8, 4, 3, 4  # cells -4..3: negative coordinates, even shift


def _grid(seed: int = 0, batch: int = 2, density: float = 0.3):
    """A stride-1 SparseTensor and the zero-filled dense grid holding the same features."""
    gen = torch.Generator().manual_seed(seed)
    occupied = torch.rand(batch, SIZE, SIZE, SIZE, generator=gen) < density
    dense_idx = occupied.nonzero()
    coords = dense_idx.clone()
    coords[:, 1:] -= SHIFT
    order = hash_coords(coords).argsort()
    coords, dense_idx = coords[order], dense_idx[order]
    feats = torch.randn(len(coords), C_IN, generator=gen, dtype=torch.float64)
    dense = torch.zeros(batch, C_IN, SIZE, SIZE, SIZE, dtype=torch.float64)
    dense[dense_idx[:, 0], :, dense_idx[:, 1], dense_idx[:, 2], dense_idx[:, 3]] = feats
    return SparseTensor(coords, feats), dense


def _dense_weight(conv, transposed: bool = False):
    k = conv.kernel_size
    w = conv.weight.detach().view(k, k, k, conv.in_channels, conv.out_channels)
    return w.permute(3, 4, 0, 1, 2) if transposed else w.permute(4, 3, 0, 1, 2)


def _at(dense, coords, shift):
    idx = coords.clone()
    idx[:, 1:] += shift
    return dense[idx[:, 0], :, idx[:, 1], idx[:, 2], idx[:, 3]]


@pytest.mark.parametrize('kernel_size,dilation', [(1, 1), (2, 1), (3, 1), (3, 2), (5, 1)])
def test_submanifold_matches_dense(kernel_size, dilation):
    x, dense = _grid()
    conv = _conv(C_IN, C_OUT, kernel_size, dilation=dilation, bias=True).double()
    torch.nn.init.normal_(conv.bias)
    y = conv(x)
    assert y.coords is x.coords and y.stride == 1
    if kernel_size % 2:
        ref = F.conv3d(dense, _dense_weight(conv), conv.bias, dilation=dilation,
                       padding=dilation * (kernel_size - 1) // 2)
    else:  # even kernels cover offsets 0..k-1
        ref = F.conv3d(F.pad(dense, (0, kernel_size - 1) * 3), _dense_weight(conv), conv.bias)
    torch.testing.assert_close(y.feats, _at(ref, y.coords, SHIFT))


@pytest.mark.parametrize('kernel_size', [2, 3])
def test_strided_matches_dense(kernel_size):
    x, dense = _grid(seed=1)
    conv = _conv(C_IN, C_OUT, kernel_size, stride=2).double()
    y = conv(x)
    assert y.stride == 2
    expected = torch.unique(hash_coords(torch.cat([x.coords[:, :1], x.coords[:, 1:] // 2], 1)))
    assert torch.equal(y.keys, expected) and torch.equal(y.coords, unhash_coords(expected))
    ref = F.conv3d(dense, _dense_weight(conv), stride=2, padding=(kernel_size - 1) // 2)
    torch.testing.assert_close(y.feats, _at(ref, y.coords, SHIFT // 2))


def test_transposed_matches_dense():
    x, _ = _grid(seed=2)
    coarse = _conv(C_IN, C_IN, 2, stride=2).double()(x)
    coarse = coarse.replace(torch.randn_like(coarse.feats))
    dense = torch.zeros(2, C_IN, SIZE // 2, SIZE // 2, SIZE // 2, dtype=torch.float64)
    idx = coarse.coords.clone()
    idx[:, 1:] += SHIFT // 2
    dense[idx[:, 0], :, idx[:, 1], idx[:, 2], idx[:, 3]] = coarse.feats
    up = _up(C_IN, C_OUT, 2, stride=2).double()
    y = up(coarse, x)
    assert y.coords is x.coords and y.stride == 1 and y.feats.shape == (len(x.coords), C_OUT)
    ref = F.conv_transpose3d(dense, _dense_weight(up, transposed=True), stride=2)
    torch.testing.assert_close(y.feats, _at(ref, y.coords, SHIFT))
    with pytest.raises(ValueError):
        up(x, x)


@pytest.mark.parametrize('kernel_size,stride,bias', [(3, 1, False), (3, 2, False), (2, 2, True)])
def test_gradcheck(kernel_size, stride, bias):
    """The hand-written backward against finite differences."""
    x, _ = _grid(seed=3, batch=1, density=0.15)
    conv = _conv(2, 3, kernel_size, stride=stride, bias=bias).double()
    feats = torch.randn(len(x.coords), 2, dtype=torch.float64, requires_grad=True)
    weight = conv.weight.detach().clone().requires_grad_()

    def run(f, w):
        return torch.func.functional_call(conv, {'weight': w}, (x.replace(f),)).feats

    assert torch.autograd.gradcheck(run, (feats, weight))


def test_gradcheck_transposed():
    x, _ = _grid(seed=4, batch=1, density=0.15)
    coarse = _conv(C_IN, C_IN, 2, stride=2).double()(x)
    up = _up(C_IN, 2, 2, stride=2).double()
    feats = torch.randn_like(coarse.feats).requires_grad_()
    assert torch.autograd.gradcheck(lambda f: up(coarse.replace(f), x).feats, (feats,))


def test_maps_cached_per_forward():
    x, _ = _grid(seed=5)
    x = x.replace(x.feats.float())
    a, b = _conv(C_IN, C_IN, 3), _conv(C_IN, C_IN, 3)
    down = _conv(C_IN, C_IN, 2, stride=2)
    a(x)
    size = len(x.cache)
    b(a(x))
    assert len(x.cache) == size
    assert down(x).coords is down(x).coords  # one coarse coordinate set per input set
    with pytest.raises(ValueError):
        sparse_cat(x, down(x))


def test_voxelize_inverse_mapping_and_reductions():
    gen = torch.Generator().manual_seed(0)
    points = [torch.rand(50, 3, generator=gen) * 0.04 - 0.02,
              torch.rand(30, 3, generator=gen) * 0.04 - 0.02]
    feats = [torch.randn(50, 2, generator=gen), torch.randn(30, 2, generator=gen)]
    x, p2v = voxelize(points, 0.01, feats)
    batch = torch.cat([torch.zeros(50, dtype=torch.long), torch.ones(30, dtype=torch.long)])
    cells = torch.floor(torch.cat(points) / 0.01).long()
    assert torch.equal(x.coords[p2v], torch.cat([batch[:, None], cells], 1))
    assert len(x.coords) == len(torch.unique(x.coords, dim=0))
    assert (x.coords[:, 1:] < 0).any()  # floor, not truncation, below zero
    all_feats = torch.cat(feats)
    for v in range(len(x.coords)):
        members = (p2v == v).nonzero().squeeze(1)
        torch.testing.assert_close(x.feats[v], all_feats[members].mean(0))
    first, _ = voxelize(points, 0.01, feats, reduce='first')
    for v in range(len(x.coords)):
        assert torch.equal(first.feats[v], all_feats[(p2v == v).nonzero()[0, 0]])
    stacked, p2v_stacked = voxelize(torch.stack([points[0][:30], points[1]]), 0.01)
    assert p2v_stacked.shape == (60,) and stacked.coords[:, 0].max() == 1
    assert torch.equal(stacked.feats, torch.ones(len(stacked.coords), 1))
    with pytest.raises(ValueError):
        voxelize(torch.full((1, 2, 3), 1e4), 0.005)


def test_voxelize_levels_give_the_coarse_sets_of_strided_convolutions():
    """The coordinate pyramid found in voxelize's one unique equals unique(floor(coords / 2))
    level by level, and level 0 (coordinates, keys, inverse, features) is untouched by it."""
    gen = torch.Generator().manual_seed(3)
    points = [torch.rand(400, 3, generator=gen) * 0.2 - 0.1, torch.rand(300, 3, generator=gen)
              * 0.1]
    plain, p2v = voxelize(points, 0.01)
    x, p2v_levels = voxelize(points, 0.01, levels=3)
    assert ('down', id(x.coords), 2) in x.cache and ('down', id(plain.coords), 2) not in x.cache
    for a, b in ((plain.coords, x.coords), (plain.keys, x.keys), (p2v, p2v_levels),
                 (plain.feats, x.feats)):
        assert torch.equal(a, b)
    down = _conv(1, 1, 2, stride=2)
    fine, reference = x, plain
    for _ in range(3):
        fine, reference = down(fine), down(reference)
        assert torch.equal(fine.coords, reference.coords)
        assert torch.equal(fine.keys, reference.keys)
        assert torch.equal(fine.coords[:, 0].unique(), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='samples per batch'):
        voxelize([points[0]] * 200, 0.01, levels=3)


def test_voxelize_names_a_wrong_depth_scale():
    """Millimetres read as metres (factor_depth 1) put points ~600 m away: the error shows the
    range seen and names the likely cause, not only the voxel limit."""
    from mmgrasp.ops.sparse_tensor import voxelize
    points = torch.tensor([[[0.0, 0.0, 600.0], [1.0, -2.0, 900.0]]])
    with pytest.raises(ValueError, match=r'z \(depth\) 600\.\.900 m\. The depth scale is '
                                         r'probably wrong: .*factor_depth'):
        voxelize(points, 0.005)


def _two_level_set(seed: int):
    gen = torch.Generator().manual_seed(seed)
    points = torch.rand(2, 3000, 3, generator=gen) * torch.tensor([0.3, 0.3, 0.05])
    x, _ = voxelize(points, 0.01, levels=1)
    return x.replace(torch.randn(len(x.coords), 8, generator=gen))


def _conv_step(x):
    torch.manual_seed(0)
    sub, down = _conv(8, 16, 3), _conv(16, 16, 2, stride=2)
    up = _up(16, 8, 2, stride=2)
    feats = x.feats.clone().requires_grad_()
    fine = sub(x.replace(feats))
    out = up(down(fine), fine)
    (out.feats.square().sum() + fine.feats.sum()).backward()
    return out.feats.detach(), feats.grad, [m.weight.grad for m in (sub, down, up)]


def test_the_two_algorithms_agree_and_each_is_deterministic(monkeypatch, algorithm):
    x = _two_level_set(seed=11)
    runs = {}
    for name in ('chunked_im2col', 'pairs'):
        monkeypatch.setitem(LAYER, 'algorithm', name)
        runs[name] = _conv_step(x.replace(x.feats))
        again = _conv_step(x.replace(x.feats))
        for a, b in zip(runs[name][:2] + tuple(runs[name][2]), again[:2] + tuple(again[2])):
            assert torch.equal(a, b), name
    im2col, pairs = runs['chunked_im2col'], runs['pairs']
    for a, b in zip(im2col[:2] + tuple(im2col[2]), pairs[:2] + tuple(pairs[2])):
        assert torch.isfinite(a).all() and a.abs().max() > 0
        # float32 sums of thousands of terms in another order: close relative to the scale
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(a.abs().max()))


def test_the_algorithm_is_chosen_by_device_unless_set():
    assert resolve_conv_algorithm('auto', torch.device('cpu')) == 'pairs'
    assert resolve_conv_algorithm('auto', torch.device('cuda')) == 'chunked_im2col'
    assert resolve_conv_algorithm('chunked_im2col', torch.device('cpu')) == 'chunked_im2col'
    assert resolve_conv_algorithm('pairs', torch.device('cuda')) == 'pairs'
    for wrong in ('gemm', 'im2col'):  # 'gemm': the name before the chunking
        with pytest.raises(ValueError, match=f"algorithm='{wrong}'"):
            resolve_conv_algorithm(wrong, torch.device('cpu'))
        with pytest.raises(ValueError, match=f"algorithm='{wrong}'"):
            SparseConv3d(2, 2, 3, algorithm=wrong)
