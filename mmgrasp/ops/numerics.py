"""The numerics switches of the CUDA path, in one place: what each may say, how ``auto``
resolves on a device, and the line logged when a model is built.

Both are model config keys, so they are in the config and its hash
(:func:`mmgrasp.engine.hooks.config_hash_hook.config_hash` hashes the whole config):

- ``model.point_ops`` (every detector): the samplers' and queries' implementation for the
  forward passes (:mod:`.point_ops`): ``torch`` (the references everywhere), ``triton`` (the
  one-launch kernels on every tensor: on CPU tensors under ``TRITON_INTERPRET=1``) or ``auto``
  (the kernels on CUDA tensors, the references on the CPU; without Triton the references,
  with one warning saying so). A detector's forward runs under :func:`point_ops_backend`.
- ``model.backbone.conv_algorithm`` (the sparse U-Net): how the torch backend's sparse
  convolutions compute (:mod:`.sparse_conv`): ``chunked_im2col``, ``pairs`` or ``auto``
  (``chunked_im2col`` on CUDA, ``pairs`` on the CPU), resolved per call by
  :func:`resolve_conv_algorithm`.
"""
import contextvars
from contextlib import contextmanager
from typing import Iterator

import torch
from mmengine.logging import print_log

#: The values of each switch, by the name of its config key's last part.
CHOICES = {
    'point_ops': ('auto', 'torch', 'triton'),
    'conv_algorithm': ('auto', 'chunked_im2col', 'pairs'),
}
#: What ``auto`` means, as logged.
AUTO_MEANS = {
    'point_ops': 'Triton kernels on CUDA tensors, torch references on the CPU',
    'conv_algorithm': 'chunked_im2col on CUDA, pairs on the CPU',
}

_POINT_OPS = contextvars.ContextVar('mmgrasp_point_ops', default='auto')


def check_choice(switch: str, choice: str) -> str:
    """``choice`` if it is one of ``switch``'s values, else a ValueError naming both."""
    if choice not in CHOICES[switch]:
        raise ValueError(f'{switch}={choice!r}: expected one of {CHOICES[switch]}')
    return choice


def log_choices(owner: str, auto_applies: bool = True, **settings: str) -> None:
    """Log ``owner``'s settings as one line (``GSNet: point_ops='auto' (...)``); a switch set
    to ``auto`` gets what it means appended when ``auto_applies``."""
    notes = [AUTO_MEANS[k] for k, v in settings.items()
             if auto_applies and k in AUTO_MEANS and v == 'auto']
    print_log(f'{owner}: ' + ', '.join(f'{k}={v!r}' for k, v in settings.items())
              + ''.join(f' ({note})' for note in notes), logger='current')


@contextmanager
def point_ops_backend(choice: str) -> Iterator[None]:
    """Run the enclosed point ops on ``choice`` (a ``point_ops`` value)."""
    token = _POINT_OPS.set(check_choice('point_ops', choice))
    try:
        yield
    finally:
        _POINT_OPS.reset(token)


def current_point_ops() -> str:
    """The ``point_ops`` value in force (``auto`` outside :func:`point_ops_backend`)."""
    return _POINT_OPS.get()


def resolve_conv_algorithm(choice: str, device: torch.device) -> str:
    """``'chunked_im2col'`` or ``'pairs'``: how the torch backend convolves on ``device``."""
    if check_choice('conv_algorithm', choice) == 'auto':
        return 'chunked_im2col' if device.type == 'cuda' else 'pairs'
    return choice
