"""Which tensors of a checkpoint fit a model, so that a load can refuse the ones that do not.

mmengine's ``Runner.load_checkpoint`` loads ``load_from`` non-strictly: a checkpoint of another
model leaves a partly initialised model with a warning, and its evaluation prints a plausible AP.
Strict loads (tools/test.py, resuming, GraspInferencer) refuse a checkpoint with missing,
unexpected or mis-shaped keys and name them; fine-tuning may load part of one when asked.
"""
import json
import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional

from torch import nn

#: What mmengine's load strips from every key (``revise_keys``): DataParallel's prefix.
WRAPPER_PREFIX = re.compile(r'^module\.')


class CheckpointMismatchError(ValueError):
    """A checkpoint's tensors do not fit the model (raised by strict loads)."""


@dataclass
class KeyReport:
    """How a checkpoint's state dict differs from a model's."""
    missing: List[str] = field(default_factory=list)  # in the model only: stay as initialised
    unexpected: List[str] = field(default_factory=list)  # in the checkpoint only: ignored
    misshaped: List[str] = field(default_factory=list)  # 'key: checkpoint (..), model (..)'

    def __bool__(self) -> bool:
        return bool(self.missing or self.unexpected or self.misshaped)

    def lines(self, limit: int = 0) -> List[str]:
        """One line per kind of difference; ``limit`` > 0 names at most that many keys each."""
        def listed(keys: List[str]) -> str:
            shown = keys if limit <= 0 else keys[:limit]
            more = len(keys) - len(shown)
            return ', '.join(shown) + (f' and {more} more' if more else '')
        lines = []
        if self.missing:
            lines.append(f'{len(self.missing)} missing keys (the model has them, the checkpoint '
                         f'does not): {listed(self.missing)}')
        if self.unexpected:
            lines.append(f'{len(self.unexpected)} unexpected keys (the checkpoint has them, the '
                         f'model does not): {listed(self.unexpected)}')
        if self.misshaped:
            lines.append(f'{len(self.misshaped)} mis-shaped keys: {listed(self.misshaped)}')
        return lines


def checkpoint_state_dict(checkpoint: Mapping, source: str = 'checkpoint') -> dict:
    """The model weights of a loaded checkpoint as mmengine's load sees them: its
    ``state_dict`` (or the checkpoint itself), the ``module.`` prefix stripped."""
    if not isinstance(checkpoint, Mapping):
        raise CheckpointMismatchError(f'{source}: holds a {type(checkpoint).__name__}, expected '
                                      f'a dict of tensors or a dict with a state_dict')
    state = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state, Mapping):
        raise CheckpointMismatchError(f'{source}: its state_dict is a {type(state).__name__}, '
                                      f'expected a dict of tensors')
    return {WRAPPER_PREFIX.sub('', key): value for key, value in state.items()}


def compare_state_dict(model: nn.Module, state: Mapping) -> KeyReport:
    """Keys of ``state`` that the model lacks, keys of the model that ``state`` lacks, and keys
    whose shapes differ, each in the order of the model (or of ``state``)."""
    expected = model.state_dict()
    report = KeyReport(missing=[k for k in expected if k not in state],
                       unexpected=[k for k in state if k not in expected])
    for key, value in expected.items():
        if key in state:
            shape = tuple(getattr(state[key], 'shape', ()))
            if shape != tuple(value.shape):
                report.misshaped.append(f'{key}: checkpoint {shape}, model {tuple(value.shape)}')
    return report


def trained_method(checkpoint: Mapping) -> Optional[str]:
    """What the checkpoint's meta says it is: the model type of the config ConfigHashHook
    stored (``meta['hashed_config']``, JSON; read as data, never executed), or the method a
    converted checkpoint names (tools/model_converters); None when the meta says neither."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    try:
        model = json.loads(meta.get('hashed_config') or 'null')
        model = model.get('model') if isinstance(model, dict) else None
    except (TypeError, ValueError):
        model = None
    if isinstance(model, dict) and isinstance(model.get('type'), str):
        backbone = model.get('backbone')
        inner = backbone.get('type') if isinstance(backbone, dict) else None
        return f"{model['type']}" + (f' (backbone {inner})' if isinstance(inner, str) else '')
    if isinstance(meta.get('method'), str):
        config = meta.get('config')
        return f"{meta['method']} (converted{' for ' + config if isinstance(config, str) else ''})"
    return None


def check_checkpoint(model: nn.Module, checkpoint: Mapping, source: str = 'checkpoint',
                     partial: bool = False, hint: str = '') -> KeyReport:
    """Compare a loaded checkpoint with ``model``; raise :class:`CheckpointMismatchError`
    naming the keys (at most 8 of each kind, ``hint`` appended) unless ``partial``. Returns the
    report (empty when everything fits)."""
    report = compare_state_dict(model, checkpoint_state_dict(checkpoint, source))
    if report and not partial:
        method = trained_method(checkpoint)
        trained = (f'\n  its meta says it is a {method} checkpoint: use the config it was '
                   f'trained with' if method else '')
        raise CheckpointMismatchError(
            f'{source} does not fit the model ({type(model).__name__}); a strict load refuses '
            f'it:\n  ' + '\n  '.join(report.lines(limit=8)) + trained
            + (f'\n{hint}' if hint else ''))
    return report
