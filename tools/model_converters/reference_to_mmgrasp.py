#!/usr/bin/env python
"""Convert a checkpoint of a reference implementation into an mmgrasp checkpoint.

    python tools/model_converters/reference_to_mmgrasp.py \
        {economicgrasp,finegrasp,graspnet_baseline,gsnet,hggd,scale_balanced} SRC DST \
        [--config CONFIG]

SRC is what the reference ``train.py`` saves (graspnet-baseline, graspness_implementation for
GSNet, Scale-Balanced-Grasp, iSEE-Laboratory/EconomicGrasp): a ``torch.save`` dict whose
``model_state_dict`` holds the weights, read with ``weights_only=True``.
Weights saved from an ``nn.DataParallel`` / DDP wrapper (every key starting ``module.``) are
read with the prefix stripped (said on the command line and kept in DST's meta).

For ``finegrasp`` SRC is the published ``model.safetensors`` (hub repo
``HorizonRobotics/FineGrasp``, ``finegrasp_pipeline/model.safetensors``; download it yourself,
nothing is fetched here) or the folder holding it: the model's state-dict names with no prefix
(tests/data/reference_state_dicts/finegrasp.json), read with ``safetensors`` only. A pickled or
``torch.save`` file given as SRC is refused unread.
For ``hggd`` SRC is what THU-VCLab/HGGD's ``train_utils.py`` saves (the published realsense /
kinect checkpoints): a ``torch.save`` dict ``{anchor, local, gamma, beta, optimizer}`` of the
two networks' state dicts (the names mmgrasp's AnchorGraspNet / PointMultiGraspNet carry, under
``anchor_net.`` / ``local_net.``) and the (γ, β) anchors (7,), which become the model's
``anchors.gamma`` / ``anchors.beta`` buffers (float64); the optimizer state is not converted.
Read with ``weights_only=True``; any other top-level entry is refused, naming it.
DST is an mmgrasp checkpoint (``state_dict`` + ``meta``) that ``load_checkpoint(model, DST,
strict=True)`` accepts for the model of CONFIG (default: the method's shipped
``configs/<method>_deferred.py``; for ``finegrasp`` ``configs/finegrasp_published.py``, whose
normals are those the reference's hub processor feeds the published weights: open3d's sign,
unit length; for hggd ``configs/_base_/models/hggd.py``). For ``finegrasp`` DST's meta also
records the config's normals rule.

What changes besides the names:

- graspnet-baseline's and SBG's feature-propagation MLPs are ``Conv2d`` (weights end in 1, 1);
  mmgrasp's are ``Conv1d``: the last dimension is dropped.
- MinkowskiEngine (GSNet; EconomicGrasp and FineGrasp, whose backbones have the same layers)
  stores a kernel as
  (k³, C_in, C_out) with offset i of the k×k×k kernel at x = i % k, y = (i // k) % k,
  z = i // k² (x fastest, ME ``kernel_region.hpp`` ``coordinate_at``; 0..k-1 for even k,
  centred for odd k); mmgrasp's ``kernel_offsets`` runs z
  fastest, so every kernel larger than 1 is permuted. A 1×1×1 kernel is stored (C_in, C_out)
  and a bias (1, C). The result serves both backends of
  the sparse U-Net: ``backend='spconv'`` permutes each weight to spconv's (C_out, k, k, k,
  C_in) at call time (``mmgrasp/ops/spconv_backend.py``): nothing converts twice.

Anything else is refused, naming the keys: a key no rule knows, a tensor whose shape does not
convert to the model's, a model tensor nothing provides.
"""
import argparse
import os
import re
import sys
from typing import Callable, Dict, List, Optional, Tuple

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METHODS = ('economicgrasp', 'finegrasp', 'graspnet_baseline', 'gsnet', 'hggd', 'scale_balanced')
#: Methods whose published weights are safetensors files (the others: torch.save dicts).
SAFETENSORS_METHODS = ('finegrasp',)
SAFETENSORS_NAME = 'model.safetensors'  # the file name in a hub snapshot folder
#: Default configs other than configs/<method>_deferred.py: the published FineGrasp weights
#: take the hub processor's normals (orientation 'solver', scale 1); HGGD has no dataset config.
DEFAULT_CONFIGS = {'finegrasp': 'finegrasp_published.py',
                   'hggd': os.path.join('_base_', 'models', 'hggd.py')}
DATA_PARALLEL_PREFIX = 'module.'  # what nn.DataParallel and DDP put before every key


class ConversionError(ValueError):
    """The source is not a checkpoint of the method's reference layout."""


def conv2d_to_conv1d(weight: torch.Tensor) -> torch.Tensor:
    """(C_out, C_in, 1, 1) -> (C_out, C_in, 1)."""
    if weight.dim() != 4 or weight.shape[-1] != 1:
        raise ValueError(f'expected a Conv2d weight (C_out, C_in, k, 1), got {tuple(weight.shape)}')
    return weight[..., 0]


def me_kernel_to_mmgrasp(kernel: torch.Tensor) -> torch.Tensor:
    """MinkowskiEngine kernel -> mmgrasp sparse conv weight (k³, C_in, C_out), z fastest."""
    if kernel.dim() == 2:  # 1×1×1, stride 1
        return kernel[None]
    if kernel.dim() != 3:
        raise ValueError(f'expected (k³, C_in, C_out) or (C_in, C_out), got {tuple(kernel.shape)}')
    volume, c_in, c_out = kernel.shape
    k = round(volume ** (1 / 3))
    if k ** 3 != volume:
        raise ValueError(f'kernel volume {volume} is not a cube')
    # ME's index is x + k·y + k²·z: as (z, y, x) axes; mmgrasp's is z + k·y + k²·x.
    return kernel.reshape(k, k, k, c_in, c_out).permute(2, 1, 0, 3, 4).reshape(volume, c_in, c_out)


def me_bias_to_mmgrasp(bias: torch.Tensor) -> torch.Tensor:
    """(1, C) -> (C,)."""
    if bias.dim() != 2 or bias.shape[0] != 1:
        raise ValueError(f'expected a (1, C) bias, got {tuple(bias.shape)}')
    return bias[0]


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


Rule = Tuple[str, Callable[[re.Match], str], Callable[[torch.Tensor], torch.Tensor]]


def _mlp(prefix: Callable[[re.Match], str]) -> Callable[[re.Match], str]:
    """SharedMLP ``layerN.conv`` / ``layerN.bn.bn`` -> nn.Sequential index 3N / 3N + 1."""
    def name(m: re.Match) -> str:
        layer, part, tail = int(m['layer']), m['part'], m['tail']
        return f'{prefix(m)}.{3 * layer + (0 if part == "conv" else 1)}.{tail}'
    return name


def _head(prefix: str) -> Callable[[re.Match], str]:
    """``convN`` / ``bnN`` of a conv-bn-relu head -> nn.Sequential index 3(N-1) / 3(N-1) + 1."""
    def name(m: re.Match) -> str:
        n = int(m['n'])
        return f'{prefix.format(**m.groupdict())}.{3 * (n - 1) + (m["kind"] == "bn")}.{m["tail"]}'
    return name


_LAYER = r'layer(?P<layer>\d+)\.(?P<part>conv|bn\.bn)\.(?P<tail>\w+)'
_HEAD_CONVS = (r'(?P<kind>conv|bn)(?P<n>[123])\.(?P<tail>\w+)')


def _pointnet_heads(grasp_prefix: str) -> List[Rule]:
    return [
        (r'view_estimator\.vpmodule\.' + _HEAD_CONVS, _head('approach.layers'), _copy),
        (grasp_prefix + r'(?P<net>operation|tolerance)\.' + _HEAD_CONVS,
         _head('{net}.layers'), _copy),
    ]


RULES: Dict[str, List[Rule]] = {
    'graspnet_baseline': [
        (r'view_estimator\.backbone\.sa(?P<i>[1-4])\.mlp_module\.' + _LAYER,
         _mlp(lambda m: f'backbone.sa.{int(m["i"]) - 1}.mlp'), _copy),
        (r'view_estimator\.backbone\.fp(?P<i>[12])\.mlp\.layer(?P<layer>\d+)\.conv\.weight',
         lambda m: f'backbone.fp.{int(m["i"]) - 1}.mlp.{3 * int(m["layer"])}.weight',
         conv2d_to_conv1d),
        (r'view_estimator\.backbone\.fp(?P<i>[12])\.mlp\.layer(?P<layer>\d+)\.(?P<part>bn\.bn)'
         r'\.(?P<tail>\w+)', _mlp(lambda m: f'backbone.fp.{int(m["i"]) - 1}.mlp'), _copy),
        (r'grasp_generator\.crop\.mlps\.' + _LAYER, _mlp(lambda m: 'crop.mlp'), _copy),
    ] + _pointnet_heads(r'grasp_generator\.'),
    'scale_balanced': [
        (r'view_estimator\.backbone\.sa(?P<i>[12])\.mlp_module\.' + _LAYER,
         _mlp(lambda m: f'backbone.sa{m["i"]}.mlp'), _copy),
        (r'view_estimator\.backbone\.(?P<rest>transformer[12]\.(fc1|fc2|fc_delta\.[02]|'
         r'fc_gamma\.[02])\.(weight|bias)|transformer[12]\.w_[qkv]s\.weight)',
         lambda m: f'backbone.{m["rest"]}', _copy),
        (r'grasp_generator\.crop(?P<i>[1-4])\.mlps\.' + _LAYER,
         _mlp(lambda m: f'crop.crops.{int(m["i"]) - 1}.mlp'), _copy),
        (r'grasp_generator\.fuse_multi_scale\.(?P<tail>weight|bias)',
         lambda m: f'crop.fuse.{m["tail"]}', _copy),
        (r'grasp_generator\.gate_fusion\.0\.(?P<tail>weight|bias)',
         lambda m: f'crop.gate.0.{m["tail"]}', _copy),
    ] + _pointnet_heads(r'grasp_generator\.'),
}

# GSNet: MinkUNet14D module names -> SparseUNet14's.
_GSNET_MODULES = {'conv0p1s1': 'stem.0', 'bn0': 'stem.1', 'final': 'head'}
for _i, (_conv, _block) in enumerate(zip(('conv1p1s2', 'conv2p2s2', 'conv3p4s2', 'conv4p8s2'),
                                         ('block1', 'block2', 'block3', 'block4'))):
    _GSNET_MODULES.update({_conv: f'down.{_i}.0', f'bn{_i + 1}': f'down.{_i}.1',
                           _block: f'down.{_i}.3'})
for _i, (_conv, _block) in enumerate(zip(('convtr4p16s2', 'convtr5p8s2', 'convtr6p4s2',
                                          'convtr7p2s2'),
                                         ('block5', 'block6', 'block7', 'block8'))):
    _GSNET_MODULES.update({_conv: f'up_convs.{_i}', f'bntr{_i + 4}': f'up_norms.{_i}.0',
                           _block: f'up_blocks.{_i}'})
_GSNET_NAME = '|'.join(sorted(_GSNET_MODULES, key=len, reverse=True))
_BN_TAIL = r'(?P<tail>weight|bias|running_mean|running_var|num_batches_tracked)'


def _gsnet_module(m: re.Match) -> str:
    return f'backbone.{_GSNET_MODULES[m["module"]]}{m["inner"] or ""}'


RULES['gsnet'] = [
    (rf'backbone\.(?P<module>{_GSNET_NAME})(?P<inner>\.0\.(conv[12]|downsample\.0))?\.kernel',
     lambda m: _gsnet_module(m) + '.weight', me_kernel_to_mmgrasp),
    (rf'backbone\.(?P<module>final)(?P<inner>)\.bias', lambda m: 'backbone.head.bias',
     me_bias_to_mmgrasp),
    (rf'backbone\.(?P<module>{_GSNET_NAME})(?P<inner>\.0\.(norm[12]|downsample\.1))?\.bn\.'
     + _BN_TAIL, lambda m: f'{_gsnet_module(m)}.{m["tail"]}', _copy),
    (r'graspable\.conv_graspable\.(?P<tail>weight|bias)',
     lambda m: f'graspable_head.conv.{m["tail"]}', _copy),
    (r'rotation\.(?P<conv>conv[12])\.(?P<tail>weight|bias)',
     lambda m: f'approach_head.{m["conv"]}.{m["tail"]}', _copy),
    (r'crop\.mlps\.' + _LAYER, _mlp(lambda m: 'crop.mlp'), _copy),
    (r'swad\.(?P<conv>conv1|conv_swad)\.(?P<tail>weight|bias)',
     lambda m: f'swad_head.{"conv1" if m["conv"] == "conv1" else "conv2"}.{m["tail"]}', _copy),
]

# EconomicGrasp: GSNet's backbone and graspable head; its view, crop and grasp-head names.
_ECONOMIC_ATTENTION = {'msa.linears.0': 'query', 'msa.linears.1': 'key', 'msa.linears.2': 'value',
                       'msa.linears.3': 'out', 'norm1': 'norm'}
_ECONOMIC_TOKENS = r'(?P<token>angle|depth|width|score)'
RULES['economicgrasp'] = [rule for rule in RULES['gsnet']
                          if rule[0].startswith(('backbone', 'graspable'))] + [
    (r'view\.(?P<conv>conv[12])\.(?P<tail>weight|bias)',
     lambda m: f'approach_head.{m["conv"]}.{m["tail"]}', _copy),
    (r'cy_group\.(?P<mlp>mlps2?)\.' + _LAYER,
     _mlp(lambda m: 'crop.mlp2' if m['mlp'] == 'mlps2' else 'crop.mlp'), _copy),
    (r'(?P<module>cy_group\.local|grasp_head\.global)_interaction_module\.'
     r'(?P<part>msa\.linears\.[0-3]|norm1)\.(?P<tail>weight|bias)',
     lambda m: (f'{"crop" if m["module"].startswith("cy") else "grasp_head"}.attention.'
                f'{_ECONOMIC_ATTENTION[m["part"]]}.{m["tail"]}'), _copy),
    (rf'grasp_head\.conv_{_ECONOMIC_TOKENS}_feature\.(?P<tail>weight|bias)',
     lambda m: f'grasp_head.embeddings.{m["token"]}.{m["tail"]}', _copy),
    (rf'grasp_head\.conv_{_ECONOMIC_TOKENS}\.(?P<tail>weight|bias)',
     lambda m: f'grasp_head.outputs.{m["token"]}.{m["tail"]}', _copy),
]

# FineGrasp: GSNet's backbone names (its MinkUNet is MinkUNet14D layer for layer, on 6 input
# channels) and graspable head; the rest table-driven, reference module -> mmgrasp module, the
# tensor name after it kept (all plain PyTorch layers: nothing to transpose). ``{g}`` is the
# cylinder group, ``{i}`` a transformer layer, ``{token}`` angle/depth/width/score.
_FINEGRASP_HEAD: List[Tuple[str, str]] = [
    (r'view\.(?P<conv>conv[12])', 'approach_head.{conv}'),
    (r'cy_groups\.(?P<g>\d+)\.mlps\.layer(?P<layer>\d+)\.(?P<part>conv|bn\.bn)',
     'crop.groups.{g}.mlp.{index}'),
    (r'cy_groups\.(?P<g>\d+)\.mlps2\.layer(?P<layer>\d+)\.(?P<part>conv|bn\.bn)',
     'crop.groups.{g}.mlp2.{index}'),
    (r'cy_groups\.(?P<g>\d+)\.local_interaction_module\.(?P<attention>msa\.linears\.[0-3]|norm1)',
     'crop.groups.{g}.attention.{attention}'),
    (r'fuse_multi_scale\.transformer\.layers\.(?P<i>\d+)\.(?P<rest>self_attn(\.out_proj)?|'
     r'linear[12]|norm[12])', 'crop.fusion.layers.{i}.{rest}'),
    (r'fuse_multi_scale\.attn', 'crop.fusion.attn'),
    (rf'grasp_head\.conv_{_ECONOMIC_TOKENS}_feature', 'grasp_head.embeddings.{token}'),
    (r'grasp_head\.global_interaction_module\.(?P<attention>msa\.linears\.[0-3]|norm1)',
     'grasp_head.attention.{attention}'),
    (rf'grasp_head\.conv_{_ECONOMIC_TOKENS}', 'grasp_head.outputs.{token}'),
]
_FINEGRASP_TAIL = r'(?P<tail>weight|bias|running_mean|running_var|num_batches_tracked|' \
                  r'in_proj_weight|in_proj_bias)'


def _finegrasp_name(template: str) -> Callable[[re.Match], str]:
    def name(m: re.Match) -> str:
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        if 'layer' in fields:  # SharedMLP layerN.conv / layerN.bn.bn -> Sequential 3N / 3N + 1
            fields['index'] = 3 * int(fields['layer']) + (fields['part'] != 'conv')
        if 'attention' in fields:
            fields['attention'] = _ECONOMIC_ATTENTION[fields['attention']]
        return f'{template.format(**fields)}.{m["tail"]}'
    return name


RULES['finegrasp'] = [rule for rule in RULES['gsnet']
                      if rule[0].startswith(('backbone', 'graspable'))] + [
    (rf'{pattern}\.{_FINEGRASP_TAIL}', _finegrasp_name(template), _copy)
    for pattern, template in _FINEGRASP_HEAD]


# HGGD: its two networks' names are mmgrasp's under a prefix; its anchors become buffers.
HGGD_ENTRIES = {'anchor': 'anchor_net', 'local': 'local_net'}
HGGD_ANCHORS = ('gamma', 'beta')
RULES['hggd'] = [
    (r'(?P<net>anchor|local)\.(?P<key>.+)',
     lambda m: f'{HGGD_ENTRIES[m["net"]]}.{m["key"]}', _copy),
    (r'(?P<axis>gamma|beta)', lambda m: f'anchors.{m["axis"]}', lambda t: t.double()),
]


def _rename(method: str, key: str):
    for pattern, name, transform in RULES[method]:
        match = re.fullmatch(pattern, key)
        if match:
            return name(match), transform
    return None, None


def _listed(keys: List[str], limit: int = 8) -> str:
    shown = ', '.join(keys[:limit])
    return shown + (f' and {len(keys) - limit} more' if len(keys) > limit else '')


def convert_state_dict(method: str, reference: Dict[str, torch.Tensor],
                       target: Dict[str, torch.Size]) -> Dict[str, torch.Tensor]:
    """Reference ``model_state_dict`` -> mmgrasp state dict with exactly ``target``'s keys and
    shapes (``target``: the mmgrasp model's ``{key: shape}``); raises :class:`ConversionError`
    naming every unknown key, wrong shape and missing key."""
    if method not in RULES:
        raise ConversionError(f'unknown method {method!r}; one of {", ".join(METHODS)}')
    converted, unknown, wrong, sources = {}, [], [], {}
    for key, tensor in reference.items():
        name, transform = _rename(method, key)
        if name is None:
            unknown.append(key)
            continue
        try:
            value = transform(tensor)
        except ValueError as err:
            wrong.append(f'{key} {tuple(tensor.shape)}: {err}')
            continue
        if name not in target:
            unknown.append(f'{key} (-> {name}, not in the model)')
        elif tuple(value.shape) != tuple(target[name]):
            wrong.append(f'{key} {tuple(tensor.shape)} -> {name} {tuple(value.shape)}, '
                         f'the model has {tuple(target[name])}')
        else:
            converted[name] = value.contiguous()
            sources[name] = key
    missing = [k for k in target if k not in converted]
    if unknown or wrong or missing:
        lines = [f'not a {method} checkpoint of the reference layout:']
        if unknown:
            others = [m for m in RULES if m != method and
                      all(_rename(m, k)[0] is not None for k in reference)]
            hint = f' (the keys are those of {others[0]}: wrong method?)' if others else ''
            lines.append(f'  {len(unknown)} unknown keys{hint}: {_listed(unknown)}')
        if wrong:
            lines.append(f'  {len(wrong)} wrong shapes: {_listed(wrong, 4)}')
        if missing:
            lines.append(f'  {len(missing)} missing keys (mmgrasp names): {_listed(missing)}')
        raise ConversionError('\n'.join(lines))
    return {k: converted[k] for k in target}


_PICKLE_MAGIC = (b'PK\x03\x04', b'\x80')  # torch.save's zip archive, a bare pickle


def load_safetensors(path: str) -> Tuple[Dict[str, torch.Tensor], dict]:
    """The tensors of a safetensors file (or of ``model.safetensors`` in the folder ``path``)
    and its header metadata. Nothing but ``safetensors`` parses the file: a pickle is refused
    before anything reads it, and nothing is downloaded."""
    if os.path.isdir(path):
        path = os.path.join(path, SAFETENSORS_NAME)
    if not os.path.isfile(path):
        raise ConversionError(
            f'{path}: no such file. Give the path of the downloaded {SAFETENSORS_NAME} (hub repo '
            f'HorizonRobotics/FineGrasp, finegrasp_pipeline/{SAFETENSORS_NAME}) or of its '
            f'folder; the converter downloads nothing')
    with open(path, 'rb') as f:
        head = f.read(8)
    if head.startswith(_PICKLE_MAGIC):
        raise ConversionError(f'{path}: a torch.save / pickle file, not safetensors; refused '
                              f'unread (a pickle can run code). Use the published '
                              f'{SAFETENSORS_NAME}')
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(path, framework='pt', device='cpu') as f:
            metadata = f.metadata() or {}
            state = {key: f.get_tensor(key) for key in f.keys()}
    except (SafetensorError, OSError, ValueError) as err:
        raise ConversionError(f'{path}: not a safetensors file ({type(err).__name__}: {err})')
    return state, {'format': 'safetensors', 'safetensors_metadata': dict(metadata)}


def load_reference(path: str) -> Tuple[Dict[str, torch.Tensor], dict]:
    """The ``model_state_dict`` of a reference checkpoint and its other entries' summary."""
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # torch raises many kinds for a file it cannot read
        raise ConversionError(f'{path}: not a torch checkpoint ({type(err).__name__}: {err})')
    if not isinstance(checkpoint, dict):
        raise ConversionError(f'{path}: holds a {type(checkpoint).__name__}, expected a dict with '
                              f"'model_state_dict' as the reference train.py saves")
    if 'model_state_dict' not in checkpoint:
        raise ConversionError(f"{path}: no 'model_state_dict' (keys: {_listed(list(checkpoint))});"
                              f' expected a reference train.py checkpoint')
    state = checkpoint['model_state_dict']
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConversionError(f"{path}: 'model_state_dict' is not a dict of tensors")
    info = {'epoch': checkpoint.get('epoch')}
    wrapped = [k for k in state if k.startswith(DATA_PARALLEL_PREFIX)]
    if state and len(wrapped) == len(state):  # saved from a DataParallel / DDP wrapper
        state = {k[len(DATA_PARALLEL_PREFIX):]: v for k, v in state.items()}
        info['stripped_prefix'] = DATA_PARALLEL_PREFIX
    elif wrapped:
        raise ConversionError(
            f"{path}: {len(wrapped)} of {len(state)} keys start with the DataParallel prefix "
            f"'{DATA_PARALLEL_PREFIX}' ({_listed(wrapped, 3)}) and the others do not: not one "
            f"model's state dict")
    return state, info


def load_hggd(path: str) -> Tuple[Dict[str, torch.Tensor], dict]:
    """HGGD's checkpoint as one flat dict (``anchor.<key>``, ``local.<key>``, ``gamma``,
    ``beta``) and what DST's meta says of it."""
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # torch raises many kinds for a file it cannot read
        raise ConversionError(f'{path}: not a torch checkpoint of tensors ({type(err).__name__}: '
                              f'{err})')
    expected = (*HGGD_ENTRIES, *HGGD_ANCHORS)
    if not isinstance(checkpoint, dict):
        raise ConversionError(f'{path}: holds a {type(checkpoint).__name__}, expected the dict '
                              f'{{{", ".join(expected)}, optimizer}} HGGD\'s train_utils.py saves')
    missing = [k for k in expected if k not in checkpoint]
    unknown = [k for k in checkpoint if k not in expected and k != 'optimizer']
    if missing or unknown:
        raise ConversionError(f'{path}: not an HGGD checkpoint: missing {missing}, unknown '
                              f'{unknown}; expected {{{", ".join(expected)}, optimizer}}')
    flat = {}
    for entry in HGGD_ENTRIES:
        state = checkpoint[entry]
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                                  for v in state.values()):
            raise ConversionError(f"{path}: '{entry}' is not a dict of tensors")
        flat.update({f'{entry}.{k}': v for k, v in state.items()})
    for axis in HGGD_ANCHORS:
        if not isinstance(checkpoint[axis], torch.Tensor):
            raise ConversionError(f"{path}: '{axis}' is a {type(checkpoint[axis]).__name__}, "
                                  f'expected the anchors as a tensor')
        flat[axis] = checkpoint[axis]
    return flat, ({'optimizer': 'not converted'} if 'optimizer' in checkpoint else {})


def model_shapes(config: str) -> Dict[str, torch.Size]:
    """``{key: shape}`` of the state dict of the model that ``config`` builds."""
    from mmengine.config import Config

    from mmgrasp.registry import MODELS, build_in_scope
    model = build_in_scope(MODELS, Config.fromfile(config).model)
    return {k: v.shape for k, v in model.state_dict().items()}


def normal_rule(config: str) -> Optional[dict]:
    """The EstimateNormals settings of ``config``'s test pipeline (None without one)."""
    from mmengine.config import Config
    loader = Config.fromfile(config).get('test_dataloader')
    steps = loader.dataset.pipeline if loader else []
    rule = next((dict(s) for s in steps if s.get('type') == 'EstimateNormals'), None)
    return rule and {k: v for k, v in rule.items() if k not in ('type', 'apply')}


def convert_file(method: str, src: str, dst: str, config: Optional[str] = None
                 ) -> Tuple[int, dict]:
    """Convert SRC into DST (written under a temporary name, then renamed); returns the number
    of tensors and what DST's meta says of SRC."""
    config = config or os.path.join(REPO, 'configs',
                                    DEFAULT_CONFIGS.get(method, f'{method}_deferred.py'))
    loader = (load_safetensors if method in SAFETENSORS_METHODS else
              load_hggd if method == 'hggd' else load_reference)
    reference, info = loader(src)
    try:
        state = convert_state_dict(method, reference, model_shapes(config))
    except ConversionError as err:
        raise ConversionError(f'{src}: {err}') from None
    meta = dict(converted_from=os.path.abspath(src), method=method, config=config, **info)
    if method == 'finegrasp':
        meta['normals'] = normal_rule(config)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    torch.save({'state_dict': state, 'meta': meta}, dst + '.tmp')
    os.replace(dst + '.tmp', dst)
    return len(state), meta


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('method', choices=METHODS)
    parser.add_argument('src', help='reference checkpoint (dict with model_state_dict; for '
                                    'finegrasp model.safetensors or its folder; for hggd the '
                                    'dict of anchor, local, gamma, beta)')
    parser.add_argument('dst', help='mmgrasp checkpoint to write')
    parser.add_argument('--config', help='mmgrasp config of the model (default: '
                                         'configs/<method>_deferred.py; finegrasp: '
                                         'configs/finegrasp_published.py; hggd: '
                                         'configs/_base_/models/hggd.py)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from mmgrasp.apis import register_all_modules
    register_all_modules(False)
    try:
        count, meta = convert_file(args.method, args.src, args.dst, args.config)
    except ConversionError as err:
        print(f'error: {err}', file=sys.stderr)
        return 1
    if 'stripped_prefix' in meta:
        print(f"{args.src}: saved from a DataParallel wrapper; stripped "
              f"'{meta['stripped_prefix']}' from every key")
    print(f'wrote {count} tensors to {args.dst}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
