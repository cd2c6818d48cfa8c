"""tools/model_converters/reference_to_mmgrasp.py against the reference layouts.

The reference key/shape lists (tests/data/reference_state_dicts) come from the reference models'
own ``state_dict()``. The round trip writes mmgrasp weights into the reference layout with an
inverse written here, independently of the converter (the kernel offsets are matched one by one
from MinkowskiEngine's numbering), converts them back and compares the model outputs.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import load_checkpoint

from mmgrasp.ops.sparse_conv import kernel_offsets
from mmgrasp.registry import MODELS, build_in_scope
from mmgrasp.apis import register_all_modules
from _scripts import script_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOOL = os.path.join(REPO, 'tools', 'model_converters', 'reference_to_mmgrasp.py')
DATA = os.path.join(REPO, 'tests', 'data', 'reference_state_dicts')
METHODS = ('graspnet_baseline', 'gsnet', 'scale_balanced')
COUNTS = {'graspnet_baseline': (1025964, 162), 'gsnet': (15353775, 216),
          'scale_balanced': (1577196, 190)}

converter = script_module('tools/model_converters/reference_to_mmgrasp.py')
register_all_modules(False)

# Small models of each method for the round trip (same module structure, fewer channels;
# no collision filter: the network's own rows are compared).
SMALL = {
    'gsnet': dict(type='GSNet', num_seeds=32, num_views=5, num_angles=3, num_depths=3,
                  backbone=dict(type='SparseUNet14', channels=(8, 8, 16, 16, 16, 8, 8, 8),
                                out_channels=16),
                  crop=dict(channels=(16, 16)), assigner=dict(type='NearestLabelAssigner',
                                                              num_views=5)),
    'graspnet_baseline': dict(num_views=5, num_angles=3, num_depths=3,
                              backbone=dict(npoints=(128, 64, 32, 16), nsamples=(16, 8, 8, 8),
                                            scale=0.125),
                              crop=dict(nsample=8, channels=(8, 8, 16), hmax=(0.01, 0.02, 0.03)),
                              assigner=dict(num_views=5), test_cfg=dict(collision_thresh=0.0)),
    'scale_balanced': dict(num_views=5, num_angles=3, num_depths=3,
                           backbone=dict(npoints=(128, 64), nsamples=(16, 8), scale=0.125),
                           crop=dict(nsample=8, channels=(8, 16, 32), hmax=(0.01, 0.02, 0.03)),
                           assigner=dict(num_views=5), test_cfg=dict(collision_thresh=0.0)),
}


def reference_layout(method: str) -> dict:
    with open(os.path.join(DATA, f'{method}.json')) as f:
        return json.load(f)


def shipped_model(method: str):
    return build_in_scope(MODELS, Config.fromfile(
        os.path.join(REPO, 'configs', f'{method}_deferred.py')).model)


def small_model(method: str, seed: int):
    torch.manual_seed(seed)
    if method == 'gsnet':
        cfg = SMALL[method]
    else:
        config = Config.fromfile(os.path.join(REPO, 'configs', f'{method}_deferred.py'))
        config.merge_from_dict(dict(model=SMALL[method]))
        cfg = config.model
    model = build_in_scope(MODELS, cfg)
    # Non-trivial BN statistics, so a misplaced BN tensor shows in the outputs.
    for name, buf in model.named_buffers():
        if name.endswith('running_mean'):
            buf.normal_(0, 0.1)
        elif name.endswith('running_var'):
            buf.uniform_(0.5, 1.5)
    return model.eval()


# ---- the inverse: mmgrasp -> reference layout, written independently of the converter ----

def _sequential_to_shared_mlp(index: int) -> str:
    """nn.Sequential(conv, bn, relu, ...) index -> SharedMLP's layerN.conv / layerN.bn.bn."""
    return f'layer{index // 3}.' + ('conv' if index % 3 == 0 else 'bn.bn')


def _sequential_to_head(index: int) -> str:
    """conv-bn-relu head index -> convN / bnN."""
    return ('conv' if index % 3 == 0 else 'bn') + str(index // 3 + 1)


def me_kernel(weight: torch.Tensor) -> torch.Tensor:
    """mmgrasp (k³, C_in, C_out) -> MinkowskiEngine's layout, offset by offset."""
    volume = weight.shape[0]
    if volume == 1:
        return weight[0].clone()
    k = round(volume ** (1 / 3))
    table = {tuple(o): j for j, o in enumerate(kernel_offsets(k).tolist())}
    out = torch.empty_like(weight)
    for i in range(volume):
        cell = (i % k, (i // k) % k, i // (k * k))  # ME: x fastest
        offset = cell if k % 2 == 0 else tuple(c - k // 2 for c in cell)
        out[i] = weight[table[offset]]
    return out


def _gsnet_modules() -> dict:
    names = {'backbone.stem.0': 'backbone.conv0p1s1', 'backbone.stem.1': 'backbone.bn0',
             'backbone.head': 'backbone.final'}
    for i in range(4):
        names[f'backbone.down.{i}.0'] = f'backbone.conv{i + 1}p{2 ** i}s2'
        names[f'backbone.down.{i}.1'] = f'backbone.bn{i + 1}'
        names[f'backbone.down.{i}.3.0'] = f'backbone.block{i + 1}.0'
        names[f'backbone.up_convs.{i}'] = f'backbone.convtr{i + 4}p{2 ** (4 - i)}s2'
        names[f'backbone.up_norms.{i}.0'] = f'backbone.bntr{i + 4}'
        names[f'backbone.up_blocks.{i}.0'] = f'backbone.block{i + 5}.0'
    return names


def to_reference(method: str, state: dict) -> dict:
    out = {}
    for key, value in state.items():
        parts = key.split('.')
        if method == 'gsnet':
            ref_key, value = _gsnet_key(key, value)
        elif key.startswith('backbone.sa.'):  # BL: backbone.sa.I.mlp.J.t
            ref_key = (f'view_estimator.backbone.sa{int(parts[2]) + 1}.mlp_module.'
                       f'{_sequential_to_shared_mlp(int(parts[4]))}.{parts[5]}')
        elif re.match(r'backbone\.sa[12]\.', key):  # SBG
            ref_key = (f'view_estimator.backbone.{parts[1]}.mlp_module.'
                       f'{_sequential_to_shared_mlp(int(parts[3]))}.{parts[4]}')
        elif key.startswith('backbone.fp.'):
            ref_key = (f'view_estimator.backbone.fp{int(parts[2]) + 1}.mlp.'
                       f'{_sequential_to_shared_mlp(int(parts[4]))}.{parts[5]}')
            if value.dim() == 3:
                value = value[..., None]  # Conv1d -> the reference's Conv2d
        elif key.startswith('backbone.transformer'):
            ref_key = 'view_estimator.' + key
        elif key.startswith('approach.layers.'):
            ref_key = f'view_estimator.vpmodule.{_sequential_to_head(int(parts[2]))}.{parts[3]}'
        elif key.startswith(('operation.', 'tolerance.')):
            ref_key = (f'grasp_generator.{parts[0]}.{_sequential_to_head(int(parts[2]))}.'
                       f'{parts[3]}')
        elif key.startswith('crop.mlp.'):
            ref_key = (f'grasp_generator.crop.mlps.{_sequential_to_shared_mlp(int(parts[2]))}.'
                       f'{parts[3]}')
        elif key.startswith('crop.crops.'):
            ref_key = (f'grasp_generator.crop{int(parts[2]) + 1}.mlps.'
                       f'{_sequential_to_shared_mlp(int(parts[4]))}.{parts[5]}')
        elif key.startswith('crop.fuse.'):
            ref_key = 'grasp_generator.fuse_multi_scale.' + parts[2]
        elif key.startswith('crop.gate.0.'):
            ref_key = 'grasp_generator.gate_fusion.0.' + parts[3]
        else:
            raise AssertionError(f'test inverse does not know {key}')
        out[ref_key] = value.clone()
    return out


def _gsnet_key(key: str, value: torch.Tensor):
    heads = {'graspable_head.conv': 'graspable.conv_graspable',
             'approach_head.conv1': 'rotation.conv1', 'approach_head.conv2': 'rotation.conv2',
             'swad_head.conv1': 'swad.conv1', 'swad_head.conv2': 'swad.conv_swad'}
    module, tail = key.rsplit('.', 1)
    if module in heads:
        return f'{heads[module]}.{tail}', value
    if module.startswith('crop.mlp.'):
        return f'crop.mlps.{_sequential_to_shared_mlp(int(module.split(".")[2]))}.{tail}', value
    names = _gsnet_modules()
    prefix = max((p for p in names if module == p or module.startswith(p + '.')), key=len)
    inner = module[len(prefix):]
    ref_module = names[prefix] + inner
    if tail == 'weight' and value.dim() == 3:  # a sparse convolution
        return ref_module + '.kernel', me_kernel(value)
    if module == 'backbone.head' and tail == 'bias':
        return ref_module + '.bias', value[None]
    return f'{ref_module}.bn.{tail}', value  # MinkowskiBatchNorm wraps BatchNorm1d as .bn


# ---- tests ----

@pytest.mark.parametrize('method', METHODS)
def test_committed_layout_is_the_reference_model(method):
    layout = reference_layout(method)
    shapes = layout['state_dict']
    params = sum(torch.Size(s).numel() for k, s in shapes.items()
                 if not k.endswith(('running_mean', 'running_var', 'num_batches_tracked')))
    assert (params, len(shapes)) == COUNTS[method] == (layout['parameters'], layout['tensors'])
    # the independent inverse maps the shipped mmgrasp model onto exactly that layout
    native = to_reference(method, shipped_model(method).state_dict())
    assert {k: list(v.shape) for k, v in native.items()} == shapes


@pytest.mark.parametrize('method', METHODS)
def test_reference_shaped_random_weights_load_strict(method, tmp_path, capsys):
    torch.manual_seed(1)
    state = {k: torch.randn(s) if s else torch.tensor(7)
             for k, s in reference_layout(method)['state_dict'].items()}
    src, dst = tmp_path / 'ref.tar', tmp_path / 'mmgrasp.pth'
    torch.save({'epoch': 17, 'optimizer_state_dict': {}, 'model_state_dict': state}, src)
    assert converter.main([method, str(src), str(dst)]) == 0
    assert f'wrote {COUNTS[method][1]} tensors' in capsys.readouterr().out
    model = shipped_model(method)
    load_checkpoint(model, str(dst), map_location='cpu', strict=True)
    checkpoint = torch.load(dst, weights_only=True)
    assert checkpoint['meta']['epoch'] == 17
    loaded = model.state_dict()
    # every reference tensor arrived somewhere, value for value
    assert sorted(float(v.double().sum()) for v in loaded.values()) == pytest.approx(
        sorted(float(v.double().sum()) for v in state.values()), rel=1e-6, abs=1e-3)


def _outputs(method: str, model, points: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.predict({'points': points}, None)[0].pred_grasps


def _cloud(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(1, 400, 3, generator=gen) * torch.tensor([0.2, 0.2, 0.08])
            + torch.tensor([-0.1, -0.1, 0.4]))


def _convert_into(method: str, reference: dict, seed: int):
    model = small_model(method, seed)
    target = {k: v.shape for k, v in model.state_dict().items()}
    model.load_state_dict(converter.convert_state_dict(method, reference, target), strict=True)
    return model


@pytest.mark.parametrize('method', METHODS)
def test_round_trip_outputs_equal_native(method):
    native = small_model(method, seed=0)
    reference = to_reference(method, native.state_dict())
    converted = _convert_into(method, reference, seed=1)  # other initial weights
    for key, value in native.state_dict().items():
        assert torch.equal(converted.state_dict()[key], value), key
    points = _cloud(0)
    assert torch.equal(_outputs(method, converted, points), _outputs(method, native, points))


def test_gsnet_round_trip_needs_the_kernel_permutation(monkeypatch):
    native = small_model('gsnet', seed=0)
    reference = to_reference('gsnet', native.state_dict())
    points = _cloud(0)
    expected = _outputs('gsnet', native, points)

    def unpermuted(kernel):  # the mutant: ME's order taken as mmgrasp's
        return kernel[None] if kernel.dim() == 2 else kernel

    monkeypatch.setitem(converter.RULES, 'gsnet', [
        (p, n, unpermuted if t is converter.me_kernel_to_mmgrasp else t)
        for p, n, t in converter.RULES['gsnet']])
    mutant = _convert_into('gsnet', reference, seed=1)
    assert not torch.allclose(_outputs('gsnet', mutant, points), expected)


def test_kernel_permutation_matches_offsets():
    """ME's offset (x, y, z) of index i lands on the mmgrasp index with that offset."""
    for k in (2, 3, 5):
        me = torch.arange(k ** 3, dtype=torch.float32)[:, None, None]
        converted = converter.me_kernel_to_mmgrasp(me)[:, 0, 0].long()
        for j, offset in enumerate(kernel_offsets(k).tolist()):
            cell = [o + (0 if k % 2 == 0 else k // 2) for o in offset]
            assert int(converted[j]) == cell[0] + k * cell[1] + k * k * cell[2]


def _refused(tmp_path, capsys, method: str, payload) -> str:
    src = tmp_path / 'bad.tar'
    if isinstance(payload, bytes):
        src.write_bytes(payload)
    else:
        torch.save(payload, src)
    dst = tmp_path / 'out.pth'
    assert converter.main([method, str(src), str(dst)]) == 1
    assert not dst.exists() and not os.path.exists(str(dst) + '.tmp')
    return capsys.readouterr().err


def _random(method: str) -> dict:
    return {k: torch.zeros(s) for k, s in reference_layout(method)['state_dict'].items()}


def test_wrong_files_refused_with_the_key_named(tmp_path, capsys):
    state = _random('scale_balanced')
    state['view_estimator.backbone.extra.weight'] = torch.zeros(3)
    err = _refused(tmp_path, capsys, 'scale_balanced', {'model_state_dict': state})
    assert '1 unknown keys' in err and 'view_estimator.backbone.extra.weight' in err

    state = _random('scale_balanced')
    state['grasp_generator.fuse_multi_scale.weight'] = torch.zeros(256, 512, 1)
    err = _refused(tmp_path, capsys, 'scale_balanced', {'model_state_dict': state})
    assert 'wrong shapes' in err and 'grasp_generator.fuse_multi_scale.weight (256, 512, 1)' in err
    assert '(256, 1024, 1)' in err

    state = _random('gsnet')
    state['backbone.block1.0.conv1.kernel'] = torch.zeros(26, 32, 32)
    assert 'backbone.block1.0.conv1.kernel (26, 32, 32)' in _refused(
        tmp_path, capsys, 'gsnet', {'model_state_dict': state})

    state = _random('graspnet_baseline')
    del state['grasp_generator.tolerance.conv3.bias']
    err = _refused(tmp_path, capsys, 'graspnet_baseline', {'model_state_dict': state})
    assert '1 missing keys' in err and 'tolerance.layers.6.bias' in err

    err = _refused(tmp_path, capsys, 'graspnet_baseline', {'model_state_dict': _random('gsnet')})
    assert 'the keys are those of gsnet: wrong method?' in err

    assert "no 'model_state_dict'" in _refused(tmp_path, capsys, 'gsnet', {'state_dict': {}})
    assert 'expected a dict' in _refused(tmp_path, capsys, 'gsnet', [1, 2])
    assert 'not a torch checkpoint' in _refused(tmp_path, capsys, 'gsnet', b'not a checkpoint')


@pytest.mark.slow
def test_command_line_exit_status(tmp_path):
    src = tmp_path / 'list.tar'
    torch.save([1, 2], src)
    out = subprocess.run([sys.executable, TOOL, 'gsnet', str(src), str(tmp_path / 'out.pth')],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and 'Traceback' not in out.stderr
    assert f'error: {src}: holds a list' in out.stderr


def test_data_parallel_prefix_is_stripped_or_named(tmp_path, capsys):
    """A reference checkpoint saved from nn.DataParallel (every key 'module.'-prefixed)
    converts to the same weights as the plain one; a state dict that mixes both is refused
    with the prefix named."""
    torch.manual_seed(2)
    state = {k: torch.randn(s) if s else torch.tensor(3)
             for k, s in reference_layout('graspnet_baseline')['state_dict'].items()}
    plain, wrapped = tmp_path / 'plain.tar', tmp_path / 'wrapped.tar'
    torch.save({'model_state_dict': state}, plain)
    torch.save({'model_state_dict': {f'module.{k}': v for k, v in state.items()}}, wrapped)
    assert converter.main(['graspnet_baseline', str(plain), str(tmp_path / 'plain.pth')]) == 0
    assert 'DataParallel' not in capsys.readouterr().out
    assert converter.main(['graspnet_baseline', str(wrapped), str(tmp_path / 'wrapped.pth')]) == 0
    assert "saved from a DataParallel wrapper; stripped 'module.' from every key" in \
        capsys.readouterr().out
    expected = torch.load(tmp_path / 'plain.pth', weights_only=True)
    converted = torch.load(tmp_path / 'wrapped.pth', weights_only=True)
    assert converted['meta']['stripped_prefix'] == 'module.'
    assert list(converted['state_dict']) == list(expected['state_dict'])
    for key, value in expected['state_dict'].items():
        assert torch.equal(converted['state_dict'][key], value), key

    mixed = dict(state)
    mixed['module.' + next(iter(state))] = mixed.pop(next(iter(state)))
    err = _refused(tmp_path, capsys, 'graspnet_baseline', {'model_state_dict': mixed})
    assert "1 of 162 keys start with the DataParallel prefix 'module.'" in err
