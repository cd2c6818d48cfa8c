#!/usr/bin/env python
"""tests/data/reference_state_dicts/finegrasp.json: the state dict (names, shapes, dtypes) of
RoboOrchardLab's FineGrasp, listed from the reference model itself, instantiated with the
GraspNet-1Billion config of ``projects/finegrasp_graspnet1b/configs/config_finegrasp_minkunet.py``.

MinkowskiEngine and the pointnet2 / knn CUDA ops cannot be installed without CUDA, and
RoboOrchardLab's framework modules pull accelerate and the hub; the model's own files are used
unchanged and what they import is given by a shim built here in a temporary folder:

- from the reference repositories (read with ``git show HEAD:<path>``): FineGrasp's
  ``finegrasp.py``, ``losses.py``, ``utils.py``, ``head/*``, ``backbone/minkunet.py``;
  Scale-Balanced-Grasp's ``pointnet2/pointnet2_utils.py`` and ``pytorch_utils.py`` (the
  pointnet2 FineGrasp's README installs); MinkowskiEngine's ``modules/resnet_block.py`` and
  ``utils/init.py``;
- written here (``SHIM`` below): MinkowskiEngine's conv / transposed conv / BatchNorm / ReLU
  with ME's parameters and no forward, the compiled ops as import-only stubs, and
  ``robo_orchard_lab.models.mixin`` / ``utils/build.py`` reduced to what ``__init__`` uses.

    python tools/analysis/golden/make_finegrasp_table.py \\
        --roboorchardlab MIRROR/HorizonRobotics+RoboOrchardLab/repo \\
        --minkowskiengine MIRROR/NVIDIA+MinkowskiEngine/repo \\
        --scale-balanced-grasp MIRROR/mahaoxiang822+Scale-Balanced-Grasp/repo \\
        tests/data/reference_state_dicts/finegrasp.json [--ones]

``--ones`` builds ``use_normal=False`` (3 input channels) instead. Needs only torch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict

SHIM: Dict[str, str] = {
    'MinkowskiEngine/__init__.py': '''"""MinkowskiEngine shim: the modules of FineGrasp's MinkUNet,
with ME's parameters (names, shapes, dtypes, registration order) and no forward, from
MinkowskiConvolution.py (MinkowskiConvolutionBase.__init__: ``kernel`` (kernel_volume, in, out),
or (in, out) when kernel_volume == 1 and every stride is 1, ``bias`` (1, out)),
MinkowskiNormalization.py (BatchNorm1d as ``.bn``) and MinkowskiNonlinearity.py (ReLU as
``.module``)."""
from functools import reduce

import torch
from torch.nn import Module, Parameter

from . import utils  # noqa: F401  (ME.utils.kaiming_normal_)


def _per_axis(value, dimension):
    return [value] * dimension if isinstance(value, int) else list(value)


class MinkowskiConvolutionBase(Module):

    def __init__(self, in_channels, out_channels, kernel_size=-1, stride=1, dilation=1,
                 bias=False, kernel_generator=None, is_transpose=False,
                 expand_coordinates=False, convolution_mode=None, dimension=-1):
        super().__init__()
        assert dimension > 0, dimension
        assert kernel_generator is None, 'the shim builds hyper-cube kernels only'
        kernel_size = _per_axis(kernel_size, dimension)
        kernel_stride = _per_axis(stride, dimension)
        kernel_volume = reduce(lambda k1, k2: k1 * k2, kernel_size)
        requires_strided_coordinates = reduce(lambda s1, s2: s1 == 1 and s2 == 1, kernel_stride)
        self.is_transpose = is_transpose
        self.in_channels, self.out_channels = in_channels, out_channels
        if kernel_volume == 1 and requires_strided_coordinates:
            kernel_shape = (in_channels, out_channels)
        else:
            kernel_shape = (kernel_volume, in_channels, out_channels)
        self.kernel = Parameter(torch.zeros(*kernel_shape))
        self.bias = Parameter(torch.zeros(1, out_channels)) if bias else None


class MinkowskiConvolution(MinkowskiConvolutionBase):

    def __init__(self, in_channels, out_channels, kernel_size=-1, stride=1, dilation=1,
                 bias=False, kernel_generator=None, expand_coordinates=False,
                 convolution_mode=None, dimension=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias,
                         kernel_generator, False, expand_coordinates, dimension=dimension)


class MinkowskiConvolutionTranspose(MinkowskiConvolutionBase):

    def __init__(self, in_channels, out_channels, kernel_size=-1, stride=1, dilation=1,
                 bias=False, kernel_generator=None, expand_coordinates=False,
                 convolution_mode=None, dimension=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, dilation, bias,
                         kernel_generator, True, expand_coordinates, dimension=dimension)


class MinkowskiBatchNorm(Module):

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(num_features, eps=eps, momentum=momentum, affine=affine,
                                       track_running_stats=track_running_stats)


class MinkowskiReLU(Module):

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.module = torch.nn.ReLU(*args, **kwargs)


class SparseTensor:
    """Only an annotation in minkunet.py; no forward runs."""


def __getattr__(name):
    raise AttributeError(f'MinkowskiEngine shim: {name} is not provided; the model uses it, '
                         f'so the table would be incomplete')
''',
    'MinkowskiEngine/modules/__init__.py': '',
    'MinkowskiEngine/utils/__init__.py': 'from .init import kaiming_normal_  # noqa: F401\n',
    'pointnet2/__init__.py': '',
    'pointnet2/_ext.py': '"""The compiled pointnet2 ops: imported, never called."""\n',
    'torchvision/__init__.py': '"""Imported by losses.py (sigmoid_focal_loss, not in the '
                               'config)."""\n',
    'open3d/__init__.py': '"""Imported by finegrasp/utils.py (collision detector, unused '
                          'here)."""\n',
    'robo_orchard_lab/__init__.py': '',
    'robo_orchard_lab/models/__init__.py': '',
    'robo_orchard_lab/models/finegrasp/__init__.py': '',
    'robo_orchard_lab/models/finegrasp/backbone/__init__.py':
        'from .minkunet import MinkUNet  # noqa: F401  (spunet.py: spconv, built by no config)\n',
    'robo_orchard_lab/models/mixin.py': '''"""robo_orchard_lab.models.mixin reduced to what
FineGrasp.__init__ uses: TorchModelMixin.__init__ calls nn.Module.__init__ and stores cfg and
hook handles (no parameters or buffers); TorchModuleCfg (a pydantic ClassConfig) becomes a plain
class taking keyword overrides of its class defaults."""
from typing import TypeVar

import torch

ClassType_co = type
TorchModuleCfgType_co = TypeVar('TorchModuleCfgType_co')


class ModelMixin(torch.nn.Module):

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg


class TorchModuleCfg:

    def __class_getitem__(cls, item):
        return cls

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            if not hasattr(type(self), key):
                raise TypeError(f'unknown config field {key}')
            setattr(self, key, value)
''',
    'robo_orchard_lab/utils/__init__.py': '',
    'robo_orchard_lab/utils/build.py': 'from typing import Any\n\nDelayInitDictType = Any\n',
    'robo_orchard_lab/ops/__init__.py': '',
    'robo_orchard_lab/ops/knn/__init__.py': '',
    'robo_orchard_lab/ops/knn/knn_modules.py': '"""The compiled knn op: imported, never '
                                               'called."""\n\n\ndef knn(*args, **kwargs):\n'
                                               '    raise NotImplementedError\n',
}
FINEGRASP = 'robo_orchard_lab/models/finegrasp/'
REFERENCE_FILES = {  # shim path -> (repository argument, path in that repository)
    **{FINEGRASP + f: ('roboorchardlab', FINEGRASP + f)
       for f in ('finegrasp.py', 'losses.py', 'utils.py', 'head/__init__.py', 'head/head.py',
                 'backbone/minkunet.py')},
    'pointnet2/pointnet2_utils.py': ('scale_balanced_grasp', 'pointnet2/pointnet2_utils.py'),
    'pointnet2/pytorch_utils.py': ('scale_balanced_grasp', 'pointnet2/pytorch_utils.py'),
    'MinkowskiEngine/modules/resnet_block.py': ('minkowskiengine',
                                                'MinkowskiEngine/modules/resnet_block.py'),
    'MinkowskiEngine/utils/init.py': ('minkowskiengine', 'MinkowskiEngine/utils/init.py'),
}
REPOSITORIES = {'roboorchardlab': 'HorizonRobotics/RoboOrchardLab',
                'minkowskiengine': 'NVIDIA/MinkowskiEngine',
                'scale_balanced_grasp': 'mahaoxiang822/Scale-Balanced-Grasp'}


def _git(repo: str, *args: str) -> str:
    return subprocess.check_output(['git', '-C', repo, *args], text=True)


def build_shim(folder: str, repos: Dict[str, str]) -> None:
    files = dict(SHIM)
    for path, (repo, source) in REFERENCE_FILES.items():
        files[path] = _git(repos[repo], 'show', f'HEAD:{source}')
    for path, text in files.items():
        os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(folder, path), 'w') as f:
            f.write(text)


def list_model(use_normal: bool) -> tuple:
    """(model, cfg) as config_finegrasp_minkunet.py's ``build_model`` makes them."""
    from robo_orchard_lab.models.finegrasp import losses
    from robo_orchard_lab.models.finegrasp.finegrasp import FineGrasp, FineGraspConfig
    loss = [losses.ObjectnessLoss(loss_weight=1), losses.GraspnessLoss(loss_weight=10),
            losses.ViewLoss(loss_weight=100), losses.AngleLoss(loss_weight=1),
            losses.DepthLoss(loss_weight=1), losses.ScoreClsLoss(loss_weight=1),
            losses.WidthLoss(loss_weight=10)]
    cfg = FineGraspConfig(model_name='FineGrasp', seed_feat_dim=512, graspness_threshold=0.1,
                          grasp_max_width=0.1, num_depth=4, num_view=300, num_angle=12,
                          num_seed_points=1024, voxel_size=0.005, cylinder_radius=0.07,
                          cylinder_groups=[0.25, 0.5, 0.75, 1.0], use_normal=use_normal,
                          loss=loss)
    return FineGrasp(cfg), cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in REPOSITORIES:
        parser.add_argument('--' + name.replace('_', '-'), required=True,
                            help=f'git directory of {REPOSITORIES[name]}')
    parser.add_argument('out')
    parser.add_argument('--ones', action='store_true', help='use_normal=False (3 channels)')
    args = parser.parse_args()
    repos = {name: getattr(args, name) for name in REPOSITORIES}
    commits = {name: _git(repo, 'rev-parse', 'HEAD').strip()[:7] for name, repo in repos.items()}
    with tempfile.TemporaryDirectory() as folder:
        build_shim(folder, repos)
        sys.path[:0] = [folder, os.path.join(folder, 'pointnet2')]  # `import pytorch_utils`
        import torch
        model, cfg = list_model(not args.ones)
    state = model.state_dict()
    stats = ('running_mean', 'running_var', 'num_batches_tracked')
    params = sum(p.numel() for p in model.parameters())
    assert params == sum(v.numel() for k, v in state.items() if not k.endswith(stats))
    table = {
        'source': f'{REPOSITORIES["roboorchardlab"]}@{commits["roboorchardlab"]}',
        'model': ('robo_orchard_lab/models/finegrasp/finegrasp.py FineGrasp(FineGraspConfig('
                  '...)) with the values of projects/finegrasp_graspnet1b/configs/'
                  'config_finegrasp_minkunet.py build_model: seed_feat_dim 512, num_view 300, '
                  'num_angle 12, num_depth 4, cylinder_radius 0.07, cylinder_groups '
                  f'[0.25, 0.5, 0.75, 1.0], use_normal {cfg.use_normal}, its seven losses (kept '
                  'in a plain list: not in the state dict); backbone MinkUNet of '
                  'backbone/minkunet.py, heads of head/head.py'),
        'how': ('listed from model.state_dict() of the instantiated reference model (torch '
                f'{torch.__version__}) by tools/analysis/golden/make_finegrasp_table.py: the '
                'reference files unchanged, pointnet2_utils.py and pytorch_utils.py of '
                f'{REPOSITORIES["scale_balanced_grasp"]}@{commits["scale_balanced_grasp"]}, '
                'resnet_block.py and utils/init.py of '
                f'{REPOSITORIES["minkowskiengine"]}@{commits["minkowskiengine"]}; shimmed: ME '
                'MinkowskiConvolution / MinkowskiConvolutionTranspose (kernel (kernel_volume, '
                'in, out), (in, out) when the volume is 1 and every stride 1, bias (1, out)), '
                'MinkowskiBatchNorm (BatchNorm1d as .bn), MinkowskiReLU; the pointnet2 and knn '
                'CUDA ops, open3d and torchvision as import-only stubs; '
                'robo_orchard_lab.models.mixin (ModelMixin: nn.Module storing cfg) and '
                'utils/build.py (a type alias)'),
        'parameters': params,
        'tensors': len(state),
        'state_dict': {k: list(v.shape) for k, v in state.items()},
        'dtypes': {k: str(v.dtype).replace('torch.', '') for k, v in state.items()},
    }
    with open(args.out + '.tmp', 'w') as f:
        json.dump(table, f, indent=1)
        f.write('\n')
    os.replace(args.out + '.tmp', args.out)
    print(f'{len(state)} tensors, {params} parameters -> {args.out}')


if __name__ == '__main__':
    main()
