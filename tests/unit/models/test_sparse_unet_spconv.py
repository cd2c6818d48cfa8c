"""backend='spconv' against backend='torch' (the reference) on the CPU, forward only (spconv's
CPU wheel has no backward): each layer kind with asymmetric kernels, the whole SparseUNet14 on
a synthetic frame, GSNet's backbone with converted reference-layout weights; the option's
reach and refusals. The training (backward) tests are CUDA tests:
test_sparse_unet_spconv_cuda.py."""
import json
import os
import sys

import pytest
import torch
from mmengine.config import Config
from torch.overrides import TorchFunctionMode

from _scripts import script_module
from _sparse_inputs import SMALL_UNET, table_and_hemisphere
from mmgrasp.models.backbones.sparse_unet import SparseUNet14
from mmgrasp.ops import (SparseConv3d, SparseConvTranspose3d, SparseTensor,
                         hash_coords, voxelize)
from mmgrasp.ops import spconv_backend
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.apis import register_all_modules

try:
    import spconv.pytorch as spconv
except ImportError:  # the CPU wheel: pip install spconv
    spconv = None
needs_spconv = pytest.mark.skipif(spconv is None, reason='spconv is not importable '
                                                         '(pip install spconv)')

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
TOL = dict(rtol=1e-5, atol=1e-5)


def _cloud(seed: int = 0, n: int = 3000, voxel: float = 0.01, channels: int = 4):
    """A stride-1 SparseTensor of two clouds around the origin (negative coordinates too)."""
    points = table_and_hemisphere(n=n, seed=seed) - torch.tensor([0.0, 0.0, 0.6])
    feats = torch.randn(2, n, channels, generator=torch.Generator().manual_seed(seed + 1))
    return voxelize(points, voxel, feats)[0]


def _pair(cls, *args, **kwargs):
    """The same layer on both backends, with the torch one's (random, asymmetric) weights."""
    torch.manual_seed(0)
    ref = cls(*args, **kwargs)
    if ref.bias is not None:
        torch.nn.init.normal_(ref.bias)
    other = cls(*args, backend='spconv', **kwargs)
    other.load_state_dict(ref.state_dict())
    return ref, other


def _sorted(x: SparseTensor):
    """(coords, feats) in hash order (a strided spconv layer's rows are in its own order)."""
    order = hash_coords(x.coords).argsort()
    return x.coords[order], x.feats[order]


@needs_spconv
@pytest.mark.parametrize('kernel_size,dilation,bias', [(3, 1, False), (3, 2, True),
                                                       (5, 1, False), (1, 1, True)])
def test_submanifold_matches_torch(kernel_size, dilation, bias):
    x = _cloud()
    ref, other = _pair(SparseConv3d, 4, 6, kernel_size, dilation=dilation, bias=bias)
    with torch.no_grad():
        expected, got = ref(x), other(x)
    assert got.coords is x.coords and got.stride == 1
    torch.testing.assert_close(got.feats, expected.feats, **TOL)
    assert expected.feats.abs().max() > 0.1


@needs_spconv
def test_kernel_offset_order_and_transposition(monkeypatch):
    """One weight per kernel offset (input channel c, output channel o differ: a transposed
    (C_in, C_out) shows), each offset alone: every offset lands where the torch backend puts it.
    The classic bugs, z-fastest read as x-fastest or C_in swapped with C_out, fail."""
    x = _cloud(channels=2)
    for k in (3, 5):
        ref, other = _pair(SparseConv3d, 2, 3, k)
        with torch.no_grad():
            for j in range(k ** 3):
                weight = torch.zeros(k ** 3, 2, 3)
                weight[j] = torch.arange(6.0).view(2, 3) + 1
                ref.weight.copy_(weight)
                other.weight.copy_(weight)
                torch.testing.assert_close(other(x).feats, ref(x).feats, **TOL)
    ref, other = _pair(SparseConv3d, 3, 3, 3)
    x = x.replace(torch.randn(len(x.coords), 3, generator=torch.Generator().manual_seed(0)))
    with torch.no_grad():
        expected = ref(x).feats
        torch.testing.assert_close(other(x).feats, expected, **TOL)
    mutants = {'x fastest': lambda w: w.view(3, 3, 3, 3, 3).permute(4, 2, 1, 0, 3).contiguous(),
               'C_in <-> C_out': lambda w: w.view(3, 3, 3, 3, 3).permute(3, 0, 1, 2, 4)
               .contiguous()}
    for name, mutant in mutants.items():
        monkeypatch.setattr(spconv_backend, 'krsc_weight', mutant)
        with torch.no_grad():
            assert not torch.allclose(other(x).feats, expected, atol=1e-3), name


@needs_spconv
def test_strided_and_transposed_match_torch():
    """Two stride-2 levels (negative cells: the origin shift must commute with floor) and back
    up onto the skip rows."""
    x = _cloud(seed=2)
    down1 = _pair(SparseConv3d, 4, 5, 2, stride=2)
    down2 = _pair(SparseConv3d, 5, 6, 2, stride=2)
    up2 = _pair(SparseConvTranspose3d, 6, 5, 2, stride=2)
    up1 = _pair(SparseConvTranspose3d, 5, 3, 2, stride=2, bias=True)
    results = []
    with torch.no_grad():
        for backend in range(2):
            mid = down1[backend](x)
            low = down2[backend](mid)
            assert (mid.stride, low.stride) == (2, 4)
            back = up2[backend](low, mid)
            assert back.coords is mid.coords and back.stride == 2
            top = up1[backend](back.replace(back.feats.relu()), x)
            assert top.coords is x.coords and top.stride == 1
            results.append((_sorted(mid), _sorted(low), _sorted(back), top.feats))
    (ref_mid, ref_low, ref_back, ref_top), (mid, low, back, top) = results
    assert (x.coords[:, 1:] < 0).any()
    for expected, got in ((ref_mid, mid), (ref_low, low), (ref_back, back)):
        assert torch.equal(got[0], expected[0])
        torch.testing.assert_close(got[1], expected[1], **TOL)
    torch.testing.assert_close(top, ref_top, **TOL)


@needs_spconv
def test_a_second_equal_strided_conv_of_the_same_rows():
    x = _cloud(seed=3)
    first, second = _pair(SparseConv3d, 4, 5, 2, stride=2), _pair(SparseConv3d, 4, 5, 2, stride=2)
    with torch.no_grad():
        for ref, other in (first, second):
            expected, got = _sorted(ref(x)), _sorted(other(x))
            assert torch.equal(got[0], expected[0])
            torch.testing.assert_close(got[1], expected[1], **TOL)


@needs_spconv
def test_transposed_conv_needs_the_strided_conv_of_its_target():
    x = _cloud(seed=4)
    down = SparseConv3d(4, 4, 2, stride=2, backend='spconv')
    up = SparseConvTranspose3d(4, 4, 2, stride=2, backend='spconv')
    with torch.no_grad():
        coarse = down(x)
        other = _cloud(seed=5)  # another cloud: coarse was not made from its rows
        with pytest.raises(ValueError, match='inverts the strided conv'):
            up(coarse, other)
        torch_coarse = SparseConv3d(4, 4, 2, stride=2)(x)  # rows the torch backend made
        with pytest.raises(ValueError, match='inverts the strided conv'):
            up(torch_coarse, x)
        # spconv rows are in spconv's order: a torch-backend layer refuses them
        with pytest.raises(ValueError, match='same backend'):
            SparseConv3d(4, 4, 3)(coarse)


@needs_spconv
def test_unet_matches_torch_on_a_frame(make_dataset):
    """SparseUNet14 on two synthetic frames, in eval mode (non-trivial BN statistics) and in
    training mode (batch statistics), forward only."""
    dataset = make_dataset('deferred', num_points=4000, augment=False)
    points = torch.stack([dataset[i]['inputs']['points'] for i in (0, 4)])
    torch.manual_seed(0)
    ref = SparseUNet14(**SMALL_UNET, voxel_size=0.005)
    for name, buf in ref.named_buffers():
        if name.endswith('running_mean'):
            buf.normal_(0, 0.1)
        elif name.endswith('running_var'):
            buf.uniform_(0.5, 1.5)
    other = SparseUNet14(**SMALL_UNET, voxel_size=0.005, backend='spconv')
    other.load_state_dict(ref.state_dict())
    for train in (False, True):
        ref.train(train)
        other.train(train)
        with torch.no_grad():
            expected, got = ref(points), other(points)
        assert got.shape == expected.shape == (2, 24, 4000)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
        assert expected.std() > 0.1


@needs_spconv
def test_converted_reference_weights_run_on_both_backends(make_dataset):
    """GSNet's shipped model (configs/gsnet_deferred.py) with reference-layout (MinkUNet14D)
    random weights through the converter: one state_dict, and the backbone's features agree."""
    register_all_modules(False)
    with open(os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'gsnet.json')) as f:
        shapes = json.load(f)['state_dict']
    gen = torch.Generator().manual_seed(0)
    reference = {}
    for key, shape in shapes.items():
        if key.endswith('running_var'):
            reference[key] = torch.rand(shape, generator=gen) + 0.5
        elif key.endswith('num_batches_tracked'):
            reference[key] = torch.zeros(shape, dtype=torch.long)
        else:
            reference[key] = torch.randn(shape, generator=gen) * 0.1
    config = Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_deferred.py'))
    convert = script_module('tools/model_converters/reference_to_mmgrasp.py').convert_state_dict
    models = {}
    for backend in ('torch', 'spconv'):
        config.model.backbone.backend = backend
        model = build_in_scope(MODELS, config.model).eval()
        target = {k: v.shape for k, v in model.state_dict().items()}
        model.load_state_dict(convert('gsnet', reference, target), strict=True)
        models[backend] = model
    assert models['spconv'].backbone.stem[0].backend == 'spconv'
    dataset = make_dataset('deferred', num_points=3000, augment=False)
    points = dataset[1]['inputs']['points'][None]
    with torch.no_grad():
        expected = models['torch'].backbone(points)
        got = models['spconv'].backbone(points)
    assert expected.shape == (1, 512, 3000) and expected.std() > 0.1
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


@needs_spconv
def test_backend_option_changes_what_runs(monkeypatch):
    """spconv runs every conv of the spconv U-Net but its 1³ ones (a matmul there too), and
    none of the torch U-Net; the config reaches the layers."""
    calls = []
    original = spconv_backend.convolve
    monkeypatch.setattr(spconv_backend, 'convolve',
                        lambda layer, *args: calls.append(layer) or original(layer, *args))
    points = table_and_hemisphere(batch=1, n=1000)
    for backend in ('torch', 'spconv'):
        net = MODELS.build(dict(type='SparseUNet14', **SMALL_UNET, backend=backend)).eval()
        calls.clear()
        with torch.no_grad():
            net(points)
        convs = [m for m in net.modules() if isinstance(m, (SparseConv3d, SparseConvTranspose3d))]
        assert all(m.backend == backend for m in convs)
        big = [m for m in convs if m.kernel_size > 1]
        # each once (in call order, not module order)
        assert sorted(map(id, calls)) == sorted(map(id, [] if backend == 'torch' else big))
    types = {type(m._spconv).__name__ for m in big}
    assert types == {'SubMConv3d', 'SparseConv3d', 'SparseInverseConv3d'}
    assert not any(isinstance(m, spconv.SparseModule) for m in net.modules())
    assert not [k for k, _ in net.named_parameters() if '_spconv' in k]
    register_all_modules(False)
    config = Config.fromfile(os.path.join(REPO, 'configs', 'gsnet_demo.py'))
    config.merge_from_dict({'model.backbone.backend': 'spconv'})
    gsnet = build_in_scope(MODELS, config.model)
    assert {m.backend for m in gsnet.backbone.modules() if isinstance(m, SparseConv3d)} == \
        {'spconv'}


@needs_spconv
def test_cpu_calls_are_repeatable_and_keep_the_thread_count():
    """spconv 2.3.8's CPU scatter-add races with several threads; the backend runs it on one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # A dense block (many neighbours per row): unguarded, most runs differ here.
        gen = torch.Generator().manual_seed(6)
        coords = (torch.rand(1, 16, 16, 16, generator=gen) < 0.3).nonzero()
        x = SparseTensor(coords[hash_coords(coords).argsort()], torch.randn(len(coords), 4))
        conv = SparseConv3d(4, 8, 3, backend='spconv')
        with torch.no_grad():
            runs = [conv(x).feats for _ in range(8)]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(run, runs[0]) for run in runs)


@needs_spconv
def test_cpu_backward_is_refused_by_name():
    """spconv's CPU wheel has no backward: the error says so (spconv's own is an assertion
    'Torch not compiled with CUDA enabled'); the forward under grad mode runs."""
    net = SparseUNet14(**SMALL_UNET, backend='spconv')
    out = net(table_and_hemisphere(batch=1, n=500))
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="forward passes only on the CPU"):
        out.sum().backward()


@needs_spconv
def test_layers_spconv_cannot_match_are_refused():
    with pytest.raises(ValueError, match='odd kernel_size'):
        SparseConv3d(4, 4, 2, backend='spconv')
    with pytest.raises(ValueError, match='kernel_size == stride'):
        SparseConv3d(4, 4, 3, stride=2, backend='spconv')
    with pytest.raises(ValueError, match='kernel_size == stride'):
        SparseConvTranspose3d(4, 4, 3, stride=2, backend='spconv')
    with pytest.raises(ValueError, match="needs at least one voxel"):
        with torch.no_grad():
            SparseConv3d(1, 1, 3, backend='spconv')(voxelize([torch.zeros(0, 3)], 0.01)[0])


def test_unknown_backend_and_missing_spconv_are_named(monkeypatch):
    with pytest.raises(ValueError, match="backend must be one of"):
        SparseConv3d(4, 4, 3, backend='minkowski')
    with pytest.raises(ValueError, match="backend must be one of"):
        SparseUNet14(**SMALL_UNET, backend='Spconv')
    monkeypatch.setitem(sys.modules, 'spconv.pytorch', None)  # import fails as if absent
    with pytest.raises(ImportError, match=r'spconv-cu12\d.*pip install spconv '):
        SparseUNet14(**SMALL_UNET, backend='spconv')
    SparseConv3d(4, 4, 1, backend='spconv')  # a 1³ conv is a matmul: no spconv needed


@needs_spconv
def test_a_seed_gives_both_backends_the_same_weights():
    states = []
    for backend in ('torch', 'spconv'):
        torch.manual_seed(0)
        states.append(SparseUNet14(**SMALL_UNET, backend=backend).state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


@needs_spconv
def test_unet_builds_each_map_once():
    """The decoder reuses the encoder's maps (spconv indice_keys naming the rows): 4 strided
    maps (the transposed convs replay them) and 6 submanifold ones (5³ and 3³ at stride 1,
    3³ at strides 2 to 16)."""
    net = SparseUNet14(**SMALL_UNET, backend='spconv').eval()
    x, _ = voxelize(table_and_hemisphere(), net.voxel_size, levels=4)
    with torch.no_grad():
        out = net.forward_sparse(x.replace(torch.ones(len(x.coords), 3)))
    kinds = [key.split('.')[1] for key in out.spconv.tensor.indice_dict]
    assert sorted(kinds) == ['down'] * 4 + ['subm'] * 6


class _HostReads(TorchFunctionMode):
    """Counts the tensor methods that read values on the host (``tolist``, ``item``, ``bool``
    ...), outside spconv's own convolution calls (its indice generation reads the host too)."""
    READS = frozenset(('tolist', 'item', '__bool__', '__int__', '__float__', '__index__',
                       'numpy', 'cpu'))

    def __init__(self):
        super().__init__()
        self.reads, self.inside_spconv = [], 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, '__name__', '')
        if name in self.READS and not self.inside_spconv:
            self.reads.append(name)
        return func(*args, **(kwargs or {}))


@needs_spconv
def test_the_glue_reads_the_host_once_per_forward(monkeypatch):
    """One read a forward of the whole U-Net (the coordinate bounds), as the module docstring
    says; the counter sees a read where there is one."""
    counter = _HostReads()
    from spconv.pytorch.conv import SparseConvolution
    original = SparseConvolution._conv_forward

    def spconv_call(*args, **kwargs):
        counter.inside_spconv += 1
        try:
            return original(*args, **kwargs)
        finally:
            counter.inside_spconv -= 1

    monkeypatch.setattr(SparseConvolution, '_conv_forward', spconv_call)
    net = SparseUNet14(**SMALL_UNET, backend='spconv').eval()
    x, _ = voxelize(table_and_hemisphere(), net.voxel_size, levels=4)
    x = x.replace(torch.ones(len(x.coords), 3))
    with torch.no_grad(), counter:
        net.forward_sparse(x)
    assert counter.reads == ['tolist']
    with counter:
        bool(x.coords.any())
    assert counter.reads == ['tolist', '__bool__']
