"""tools/model_converters/reference_to_mmgrasp.py ``finegrasp``: the published safetensors layout
(tests/data/reference_state_dicts/finegrasp.json, listed from the instantiated reference model
@241bbc6), MinkowskiEngine's kernel offset order against a numpy sparse convolution written from
ME's sources, strictness, and the refusal of anything but a local safetensors file.

ME's rules used by the numpy convolution (NVIDIA/MinkowskiEngine@02fc608): kernel index i of a
hyper-cube kernel is the offset with x = i % k, y = (i // k) % k, z = i // k² (``src/
kernel_region.hpp`` ``coordinate_at``: axis 0 fastest), each coordinate ``c`` for even k and
``c - k // 2`` for odd k, times the tensor stride; ``out[u] += in[u + offset_i] @ W_i`` for every
output coordinate u (``coordinate_map_cpu.hpp`` ``kernel_map``); a strided conv's outputs are
``floor(c / s) * s`` (``coordinate_map.hpp`` ``stride_coordinate``); a transposed conv uses the
kernel map of the fine -> coarse conv with the fine tensor stride, in and out swapped
(``coordinate_map_manager.cpp``); a stride-1 1³ kernel is a (C_in, C_out) matrix product.
"""
import json
import os
import pickle

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from mmgrasp.models.backbones import FineGraspUNet
from mmgrasp.apis import register_all_modules
from mmgrasp.ops import SparseConv3d, SparseConvTranspose3d, kernel_offsets, voxelize
from mmgrasp.registry import MODELS
from _scripts import script_module
from test_model_converters import _gsnet_key

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts', 'finegrasp.json')
MODEL_CONFIG = os.path.join(REPO, 'configs', '_base_', 'models', 'finegrasp.py')
converter = script_module('tools/model_converters/reference_to_mmgrasp.py')
register_all_modules(False)


def table() -> dict:
    with open(TABLE) as f:
        return json.load(f)


def random_reference(prefix: str = '', seed: int = 0) -> dict:
    """Random tensors with the table's names, shapes and dtypes (the keys under ``prefix``)."""
    gen = torch.Generator().manual_seed(seed)
    layout = table()
    out = {}
    for key, shape in layout['state_dict'].items():
        if key.startswith(prefix):
            if layout['dtypes'][key] == 'int64':
                out[key] = torch.randint(0, 1000, shape, generator=gen)
            else:
                out[key] = torch.randn(shape, generator=gen)
    return out


def backbone_target() -> dict:
    return {f'backbone.{k}': v.shape for k, v in FineGraspUNet().state_dict().items()}


# ---- ME's kernel order: numpy convolution from ME's rules ----

def me_offsets(k: int) -> np.ndarray:
    """(k³, 3) offsets in ME's kernel index order (see the module docstring)."""
    rows = []
    for i in range(k ** 3):
        cell = [(i // k ** axis) % k for axis in range(3)]  # x fastest
        rows.append(cell if k % 2 == 0 else [c - k // 2 for c in cell])
    return np.array(rows)


def me_conv(coords: np.ndarray, feats: np.ndarray, kernel: np.ndarray, k: int, tensor_stride: int,
            out_coords: np.ndarray) -> np.ndarray:
    """out[u] = sum_i in[u + offset_i * tensor_stride] @ W_i over ME coordinates."""
    rows = {tuple(c): j for j, c in enumerate(coords)}
    out = np.zeros((len(out_coords), kernel.shape[-1]))
    for q, u in enumerate(out_coords):
        for i, offset in enumerate(me_offsets(k)):
            j = rows.get(tuple(u + offset * tensor_stride))
            if j is not None:
                out[q] += feats[j] @ kernel[i]
    return out


def me_conv_transpose(coarse: np.ndarray, feats: np.ndarray, kernel: np.ndarray, k: int,
                      fine: np.ndarray, fine_stride: int) -> np.ndarray:
    """The fine -> coarse kernel map (region at each coarse u, fine tensor stride) swapped."""
    rows = {tuple(c): j for j, c in enumerate(fine)}
    out = np.zeros((len(fine), kernel.shape[-1]))
    for q, u in enumerate(coarse):
        for i, offset in enumerate(me_offsets(k)):
            j = rows.get(tuple(u + offset * fine_stride))
            if j is not None:
                out[j] += feats[q] @ kernel[i]
    return out


def _cloud(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    points = (torch.rand(1, 600, 3, generator=gen) * 0.06 - 0.03).double()  # around 0: negatives
    feats = torch.randn(1, 600, 4, generator=gen, dtype=torch.float64)
    x, _ = voxelize(points, 0.005, feats, reduce='first', levels=1)
    return x


def _me_coords(x) -> np.ndarray:
    return (x.coords[:, 1:] * x.stride).numpy()  # ME keeps stride-1 units


def _random_kernel(volume: int, c_in: int, c_out: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    shape = (volume, c_in, c_out) if volume > 1 else (c_in, c_out)
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def _layer(cls, kernel: torch.Tensor, k: int, stride: int, bias=None):
    c_in, c_out = kernel.shape[-2:]
    layer = cls(c_in, c_out, k, stride=stride, bias=bias is not None).double()
    with torch.no_grad():
        layer.weight.copy_(converter.me_kernel_to_mmgrasp(kernel))
        if bias is not None:
            layer.bias.copy_(converter.me_bias_to_mmgrasp(bias))
    return layer


@pytest.mark.parametrize('k', [5, 3])
def test_converted_submanifold_kernel_equals_me_numpy(k):
    """The stem (5³) and the blocks' 3³ convs, at stride 1 and on the stride-2 cells."""
    x = _cloud()
    kernel = _random_kernel(k ** 3, 4, 3, seed=k)
    ours = _layer(SparseConv3d, kernel, k, 1)(x).feats.detach().numpy()
    coords = _me_coords(x)
    expected = me_conv(coords, x.feats.numpy(), kernel.numpy(), k, 1, coords)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-10)
    # without the offset permutation the result differs: the check sees the order
    wrong = SparseConv3d(4, 3, k).double()
    with torch.no_grad():
        wrong.weight.copy_(kernel)
    assert np.abs(wrong(x).feats.detach().numpy() - expected).max() > 1e-3
    # on the stride-2 tensor ME's offsets are multiples of the tensor stride
    coarse = SparseConv3d(4, 4, 2, stride=2).double()(x)
    ours = _layer(SparseConv3d, kernel, k, 1)(coarse).feats.detach().numpy()
    coords = _me_coords(coarse)
    expected = me_conv(coords, coarse.feats.detach().numpy(), kernel.numpy(), k, 2, coords)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-10)


def test_converted_strided_and_transposed_kernels_equal_me_numpy():
    x = _cloud(1)
    fine = _me_coords(x)
    down = _random_kernel(8, 4, 5, seed=2)
    coarse = _layer(SparseConv3d, down, 2, 2)(x)
    out_coords = np.unique(np.floor(fine / 2).astype(np.int64) * 2, axis=0)
    assert (_me_coords(coarse) == out_coords).all()  # both sort x, y, z lexicographically
    expected = me_conv(fine, x.feats.numpy(), down.numpy(), 2, 1, out_coords)
    np.testing.assert_allclose(coarse.feats.detach().numpy(), expected, rtol=1e-10, atol=1e-10)
    up = _random_kernel(8, 5, 3, seed=3)
    ours = _layer(SparseConvTranspose3d, up, 2, 2)(coarse, x).feats.detach().numpy()
    expected = me_conv_transpose(out_coords, coarse.feats.detach().numpy(), up.numpy(), 2, fine, 1)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-10)
    assert (np.abs(expected).sum(1) > 0).all()  # every fine cell has its parent


def test_converted_pointwise_kernel_and_bias_equal_me():
    x = _cloud(2)
    kernel, bias = _random_kernel(1, 4, 6, seed=4), _random_kernel(1, 1, 6, seed=5)
    ours = _layer(SparseConv3d, kernel, 1, 1, bias)(x).feats.detach().numpy()
    # float64 sums of terms of size ~1: a few ulps of 1 apart where they cancel to near zero
    np.testing.assert_allclose(ours, x.feats.numpy() @ kernel.numpy() + bias.numpy(), rtol=1e-12,
                               atol=1e-13)


def test_me_offsets_are_mmgrasp_offsets_reordered():
    """The converter's permutation, entry by entry: mmgrasp row j holds ME row i of the same
    offset (ME's index from its formula, not from the converter)."""
    for k in (2, 3, 5):
        kernel = torch.arange(k ** 3, dtype=torch.float64).view(-1, 1, 1)
        ours = converter.me_kernel_to_mmgrasp(kernel)[:, 0, 0].long().tolist()
        base = 0 if k % 2 == 0 else k // 2
        expected = [(x + base) + k * (y + base) + k * k * (z + base)
                    for x, y, z in kernel_offsets(k).tolist()]
        assert ours == expected


# ---- the key map ----

def test_every_reference_key_has_one_target():
    """388 reference tensors -> 388 distinct mmgrasp names; the backbone's are exactly
    FineGraspUNet's."""
    names = {k: converter._rename('finegrasp', k)[0] for k in table()['state_dict']}
    assert None not in names.values() and len(set(names.values())) == len(names) == 388
    assert {v for k, v in names.items() if k.startswith('backbone.')} == set(backbone_target())


def test_backbone_converts_strictly_offset_by_offset():
    reference = random_reference('backbone.')
    converted = converter.convert_state_dict('finegrasp', reference, backbone_target())
    net = FineGraspUNet()
    net.load_state_dict({k[len('backbone.'):]: v for k, v in converted.items()}, strict=True)
    state = net.state_dict()
    stem = reference['backbone.conv0p1s1.kernel']
    for j, (x, y, z) in enumerate(kernel_offsets(5).tolist()):
        assert torch.equal(state['stem.0.weight'][j], stem[(x + 2) + 5 * (y + 2) + 25 * (z + 2)])
    up = reference['backbone.convtr7p2s2.kernel']
    for j, (x, y, z) in enumerate(kernel_offsets(2).tolist()):
        assert torch.equal(state['up_convs.3.weight'][j], up[x + 2 * y + 4 * z])
    assert torch.equal(state['head.weight'][0], reference['backbone.final.kernel'])
    assert torch.equal(state['head.bias'], reference['backbone.final.bias'][0])
    assert torch.equal(state['up_blocks.0.0.downsample.1.running_var'],
                       reference['backbone.block5.0.downsample.1.bn.running_var'])
    assert torch.equal(state['down.2.1.num_batches_tracked'],
                       reference['backbone.bn3.bn.num_batches_tracked'])


def test_wrong_keys_and_shapes_are_refused_naming_the_key():
    target = backbone_target()
    reference = random_reference('backbone.')
    reference['backbone.conv0p1s1.kernel'] = torch.zeros(125, 3, 32)  # use_normal=False weights
    with pytest.raises(converter.ConversionError,
                       match=r'backbone\.conv0p1s1\.kernel \(125, 3, 32\) -> backbone\.stem\.0'):
        converter.convert_state_dict('finegrasp', reference, target)
    reference = random_reference('backbone.')
    del reference['backbone.block8.0.norm2.bn.running_mean']
    with pytest.raises(converter.ConversionError,
                       match=r'1 missing keys .*backbone\.up_blocks\.3\.0\.norm2\.running_mean'):
        converter.convert_state_dict('finegrasp', reference, target)
    reference = random_reference('backbone.')
    reference['backbone.conv9p1s2.kernel'] = torch.zeros(8, 2, 2)
    with pytest.raises(converter.ConversionError, match=r'unknown keys.*conv9p1s2\.kernel'):
        converter.convert_state_dict('finegrasp', reference, target)


# ---- the file ----

def test_safetensors_file_reads_back_with_names_shapes_dtypes(tmp_path):
    reference = random_reference()
    folder = tmp_path / 'finegrasp_pipeline'
    folder.mkdir()
    save_file(reference, str(folder / 'model.safetensors'), metadata={'format': 'pt'})
    for src in (folder, folder / 'model.safetensors'):  # the snapshot folder or the file
        state, info = converter.load_safetensors(str(src))
        assert list(state) == sorted(reference) and all(
            torch.equal(state[k], v) and state[k].dtype == v.dtype for k, v in reference.items())
        assert info == {'format': 'safetensors', 'safetensors_metadata': {'format': 'pt'}}


class _Payload:
    """Unpickling this would create ``marker``: the proof that the file was not unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, 'w')


def test_pickles_and_missing_files_are_refused_unread(tmp_path):
    marker = tmp_path / 'unpickled'
    torch_file = tmp_path / 'model.pth'
    torch.save({'model_state_dict': random_reference('backbone.bn0')}, torch_file)
    raw = tmp_path / 'model.safetensors'
    raw.write_bytes(pickle.dumps(_Payload(str(marker))))
    for src in (torch_file, raw):
        with pytest.raises(converter.ConversionError, match='pickle file, not safetensors; '
                                                            'refused unread'):
            converter.load_safetensors(str(src))
    assert not marker.exists()
    with pytest.raises(converter.ConversionError, match='no such file.*downloads nothing'):
        converter.load_safetensors('HorizonRobotics/FineGrasp')
    garbage = tmp_path / 'garbage.safetensors'
    garbage.write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a": nonsense}')
    with pytest.raises(converter.ConversionError, match=r'garbage\.safetensors: not a safetensors'):
        converter.load_safetensors(str(garbage))
    assert converter.main(['finegrasp', str(torch_file), str(tmp_path / 'out.pth'),
                           '--config', os.path.join(REPO, 'configs', 'gsnet_deferred.py')]) == 1
    assert not (tmp_path / 'out.pth').exists()


# ---- the whole model (with the FineGrasp detector of the head's branch) ----

NEEDS_MODEL = pytest.mark.skipif(
    'FineGrasp' not in MODELS.module_dict or not os.path.exists(MODEL_CONFIG),
    reason='needs the FineGrasp detector and configs/_base_/models/finegrasp.py')
_ATTENTION = {'query': 'msa.linears.0', 'key': 'msa.linears.1', 'value': 'msa.linears.2',
              'out': 'msa.linears.3', 'norm': 'norm1'}


def to_reference(state: dict) -> dict:
    """mmgrasp FineGrasp state dict -> the reference's names and layouts, written here from
    finegrasp.py / head.py (the backbone and graspable head through test_model_converters'
    GSNet inverse, which places ME kernel offsets one by one), not from the converter."""
    out = {}
    for key, value in state.items():
        module, tail = key.rsplit('.', 1)
        parts = module.split('.')
        if parts[0] in ('backbone', 'graspable_head'):
            ref_key, value = _gsnet_key(key, value)
        elif parts[0] == 'approach_head':
            ref_key = f'view.{parts[1]}.{tail}'
        elif parts[:2] == ['crop', 'groups'] and parts[3] in ('mlp', 'mlp2'):
            i = int(parts[4])
            ref_key = (f'cy_groups.{parts[2]}.{"mlps" if parts[3] == "mlp" else "mlps2"}.'
                       f'layer{i // 3}.{"conv" if i % 3 == 0 else "bn.bn"}.{tail}')
        elif parts[:2] == ['crop', 'groups'] and parts[3] == 'attention':
            ref_key = (f'cy_groups.{parts[2]}.local_interaction_module.{_ATTENTION[parts[4]]}.'
                       f'{tail}')
        elif parts[:2] == ['crop', 'fusion']:
            inner = '.'.join(parts[2:])
            ref_key = (f'fuse_multi_scale.{"attn" if inner == "attn" else "transformer." + inner}'
                       f'.{tail}')
        elif parts[:2] == ['grasp_head', 'attention']:
            ref_key = f'grasp_head.global_interaction_module.{_ATTENTION[parts[2]]}.{tail}'
        elif parts[:2] == ['grasp_head', 'embeddings']:
            ref_key = f'grasp_head.conv_{parts[2]}_feature.{tail}'
        elif parts[:2] == ['grasp_head', 'outputs']:
            ref_key = f'grasp_head.conv_{parts[2]}.{tail}'
        else:
            raise AssertionError(f'test inverse does not know {key}')
        out[ref_key] = value.clone()
    return out


def shipped_model(seed: int, **overrides):
    from mmengine.config import Config

    from mmgrasp.registry import build_in_scope
    cfg = Config.fromfile(MODEL_CONFIG)
    cfg.merge_from_dict(dict(model=overrides))
    torch.manual_seed(seed)
    model = build_in_scope(MODELS, cfg.model)
    for name, buf in model.named_buffers():  # non-trivial BN statistics
        if name.endswith('running_mean'):
            buf.normal_(0, 0.1)
        elif name.endswith('running_var'):
            buf.uniform_(0.5, 1.5)
    return model.eval()


@NEEDS_MODEL
def test_round_trip_through_the_reference_layout_predicts_the_same():
    """The shipped model written into the reference layout is exactly the table; converted
    back into a differently initialised model it predicts the same grasps."""
    native = shipped_model(0, num_seeds=64, test_cfg=dict(collision_thresh=0.0))
    reference = to_reference(native.state_dict())
    assert {k: list(v.shape) for k, v in reference.items()} == table()['state_dict']
    converted = shipped_model(1, num_seeds=64, test_cfg=dict(collision_thresh=0.0))
    target = {k: v.shape for k, v in converted.state_dict().items()}
    converted.load_state_dict(converter.convert_state_dict('finegrasp', reference, target),
                              strict=True)
    gen = torch.Generator().manual_seed(0)
    points = (torch.rand(1, 600, 3, generator=gen) * torch.tensor([0.2, 0.2, 0.08])
              + torch.tensor([-0.1, -0.1, 0.4]))
    normals = torch.randn(1, 600, 3, generator=gen)
    inputs = {'points': points, 'normals': normals / normals.norm(dim=-1, keepdim=True)}
    with torch.no_grad():
        ours = converted.predict(inputs, None)[0].pred_grasps
        expected = native.predict(inputs, None)[0].pred_grasps
    assert len(expected) and torch.equal(ours, expected)


@NEEDS_MODEL
def test_published_layout_converts_to_the_model_strictly(tmp_path, capsys):
    from mmengine.config import Config
    from mmengine.runner import load_checkpoint

    from mmgrasp.registry import build_in_scope
    reference = random_reference(seed=1)
    save_file(reference, str(tmp_path / 'model.safetensors'))
    dst = tmp_path / 'finegrasp_mmgrasp.pth'
    assert converter.main(['finegrasp', str(tmp_path), str(dst), '--config', MODEL_CONFIG]) == 0
    assert 'wrote 388 tensors' in capsys.readouterr().out
    model = build_in_scope(MODELS, Config.fromfile(MODEL_CONFIG).model)
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    meta = torch.load(dst, weights_only=True)['meta']
    assert meta['format'] == 'safetensors' and meta['method'] == 'finegrasp'
    state = model.state_dict()
    assert torch.equal(state['crop.fusion.layers.1.self_attn.in_proj_weight'],
                       reference['fuse_multi_scale.transformer.layers.1.self_attn.in_proj_weight'])
    assert torch.equal(state['crop.groups.3.mlp2.4.running_var'],
                       reference['cy_groups.3.mlps2.layer1.bn.bn.running_var'])
    assert torch.equal(state['crop.groups.2.attention.value.weight'],
                       reference['cy_groups.2.local_interaction_module.msa.linears.2.weight'])
    assert torch.equal(state['grasp_head.outputs.score.bias'],
                       reference['grasp_head.conv_score.bias'])
    assert torch.equal(state['backbone.head.bias'], reference['backbone.final.bias'][0])


@NEEDS_MODEL
def test_published_weights_default_to_the_hub_processors_normals(tmp_path):
    """Without --config the converted weights name configs/finegrasp_published.py, whose
    normals are open3d's sign at unit length (what the hub processor feeds them), in DST's meta
    and in both pipelines."""
    from mmengine.config import Config
    save_file(random_reference(seed=2), str(tmp_path / 'model.safetensors'))
    dst = tmp_path / 'published.pth'
    assert converter.main(['finegrasp', str(tmp_path), str(dst)]) == 0
    meta = torch.load(dst, weights_only=True)['meta']
    assert meta['config'] == os.path.join(REPO, 'configs', 'finegrasp_published.py')
    assert meta['normals'] == dict(radius=0.1, max_nn=30, orientation='solver', scale=1.0)
    cfg = Config.fromfile(meta['config'])
    for loader in (cfg.train_dataloader, cfg.test_dataloader):
        steps = {s['type']: s for s in loader.dataset.pipeline}
        assert steps['EstimateNormals']['orientation'] == 'solver'
        assert steps['EstimateNormals']['apply'] == 'device'
    assert cfg.model == Config.fromfile(os.path.join(REPO, 'configs',
                                                     'finegrasp_deferred.py')).model
