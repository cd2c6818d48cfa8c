"""ConfigHashHook: a checkpoint remembers the config that trained it; resume checks it."""
import fnmatch
import hashlib
import inspect
import json
import os.path as osp
from typing import Any, Dict, List, Optional, Tuple, Union

from mmengine.config import Config
from mmengine.dist import is_main_process
from mmengine.hooks import Hook

from mmgrasp.datasets.transforms.grasp_labels import SampleGraspLabels
from mmgrasp.registry import HOOKS
from mmgrasp.storage.secrets import redact

#: Dotted paths (fnmatch patterns) left out of the hash: where a run writes, how it reports and
#: saves, how it is launched, and loader settings that by design do not change a sample
#: (per-sample RNG from (seed, epoch, index)). None of them changes the trained weights.
IGNORED_KEYS = (
    'work_dir', 'resume', 'load_from', 'load_from_partial', 'launcher', 'allow_config_mismatch',
    'experiment_name',
    'log_level', 'log_processor', 'visualizer',
    'default_hooks.timer', 'default_hooks.logger', 'default_hooks.checkpoint',
    'default_hooks.invalid_loss',
    'env_cfg', 'model_wrapper_cfg',
    '*_dataloader.num_workers', '*_dataloader.persistent_workers', '*_dataloader.pin_memory',
    '*_dataloader.prefetch_factor',
)
_GRIDS_DEFAULT = inspect.signature(SampleGraspLabels).parameters['grids'].default


def _canonical(value: Any, path: str) -> Any:
    """A JSON-able copy of a config value with the ignored keys dropped and every
    SampleGraspLabels' ``grids`` made explicit (an omitted ``grids`` hashes as its default)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            sub = f'{path}.{key}' if path else str(key)
            if not any(fnmatch.fnmatchcase(sub, pattern) for pattern in IGNORED_KEYS):
                out[str(key)] = _canonical(item, sub)
        kind = out.get('type')
        if isinstance(kind, str) and kind.rsplit('.', 1)[-1] == SampleGraspLabels.__name__:
            out.setdefault('grids', _GRIDS_DEFAULT)
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(v, f'{path}.{i}') for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if inspect.isclass(value) or inspect.isfunction(value):
        return f'{value.__module__}.{value.__qualname__}'
    if hasattr(value, 'item') and callable(value.item):  # numpy / torch scalars
        return value.item()
    text = repr(value)
    if ' at 0x' in text:  # an address would change the hash from one process to the next
        raise TypeError(f'config value {path}={text} has no stable text form; the config hash '
                        f'needs plain values, classes or functions')
    return text


def canonical_config(cfg: Union[Config, dict]) -> Dict[str, Any]:
    """The part of a resolved config that defines a run, as plain JSON-able data, with every
    secret-looking option redacted (:mod:`mmgrasp.storage.secrets`)."""
    data = cfg.to_dict() if isinstance(cfg, Config) else dict(cfg)
    return _canonical(redact(data), '')


def redacted_config(cfg: Config) -> Config:
    """``cfg`` with every secret-looking option replaced by ``'<redacted>'``."""
    return Config(redact(cfg.to_dict()), filename=cfg.filename)


def config_text(cfg: Union[Config, dict]) -> str:
    """Canonical text of :func:`canonical_config`: sorted keys, fixed separators."""
    return json.dumps(canonical_config(cfg), sort_keys=True, indent=1, ensure_ascii=True)


def config_hash(cfg: Union[Config, dict]) -> Tuple[str, str]:
    """``(sha256 hex digest, canonical text)`` of a config."""
    text = config_text(cfg)
    return hashlib.sha256(text.encode('utf-8')).hexdigest(), text


def config_diff(old: Any, new: Any, path: str = '') -> List[str]:
    """Leaf differences ``'path: old -> new'`` between two canonical configs."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(set(old) | set(new)):
            sub = f'{path}.{key}' if path else key
            if key not in old:
                lines.append(f'{sub}: (absent) -> {new[key]!r}')
            elif key not in new:
                lines.append(f'{sub}: {old[key]!r} -> (absent)')
            else:
                lines += config_diff(old[key], new[key], sub)
        return lines
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for i, (a, b) in enumerate(zip(old, new))
                for line in config_diff(a, b, f'{path}.{i}')]
    return [] if old == new else [f'{path}: {old!r} -> {new!r}']


@HOOKS.register_module()
class ConfigHashHook(Hook):
    """Write the config's hash into every checkpoint; on resume, refuse a different config.

    A resumed run continues the optimizer, scheduler and sample order of the run that wrote the
    checkpoint; doing so under another config (say ``grids='dense'`` instead of ``'deferred'``,
    another learning rate or seed) silently mixes two experiments. The hash covers
    ``runner.cfg`` (the Runner must come from ``Runner.from_cfg``) minus :data:`IGNORED_KEYS`.

    ``checkpoint['meta']`` gets ``config_hash`` (sha256) and ``hashed_config`` (the canonical
    JSON text, for the diff). On resume (``cfg.resume``), a different hash raises a RuntimeError
    naming both hashes and the differences, unless the config's top-level
    ``allow_config_mismatch=True`` (``--cfg-options allow_config_mismatch=True``), which logs
    them as a warning instead. A checkpoint without a hash (written without this hook) is
    resumed with a warning. ``load_from`` without resume (fine-tuning) is never checked.

    Secrets stay out of what it writes: the hash input, ``meta['hashed_config']``, and the
    config mmengine stores in ``meta['cfg']`` and dumps into the work dir are redacted
    (secret-looking option names, see :mod:`mmgrasp.storage.secrets`).

    Priority VERY_HIGH: the check runs before other hooks act on the loaded checkpoint.
    """

    priority = 'VERY_HIGH'

    def __init__(self) -> None:
        self._identity: Optional[Tuple[str, str]] = None
        self._redacted_text: Optional[str] = None

    def identity(self, runner) -> Tuple[str, str]:
        """``(hash, canonical text)`` of ``runner.cfg``, computed once."""
        if self._identity is None:
            self._identity = config_hash(runner.cfg)
        return self._identity

    def before_run(self, runner) -> None:
        # Hashed at the start: an unhashable config fails now, not at the first save.
        runner.logger.info(f'config hash: {self.identity(runner)[0]}')
        if is_main_process():  # the Runner dumped the config as it was: dump it redacted
            name = (osp.basename(runner.cfg.filename) if runner.cfg.filename is not None
                    else f'{runner.timestamp}.py')
            redacted_config(runner.cfg).dump(osp.join(runner.work_dir, name))

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        digest, text = self.identity(runner)
        meta = checkpoint.setdefault('meta', {})
        meta.update(config_hash=digest, hashed_config=text)
        if 'cfg' in meta:  # formatted once a run (yapf, ~0.1 s), as the hash is computed once
            if self._redacted_text is None:
                self._redacted_text = redacted_config(runner.cfg).pretty_text
            meta['cfg'] = self._redacted_text

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not runner.cfg.get('resume', False):
            return
        meta = checkpoint.get('meta', {})
        saved, (digest, text) = meta.get('config_hash'), self.identity(runner)
        if saved is None:
            runner.logger.warning('ConfigHashHook: the checkpoint has no config hash (written '
                                  'without this hook); resuming without checking its config')
            return
        if saved == digest:
            return
        old, new = json.loads(meta['hashed_config']), json.loads(text)
        top = sorted(k for k in set(old) | set(new) if old.get(k, ...) != new.get(k, ...))
        diff = config_diff(old, new)
        shown = diff[:10] + ([f'... {len(diff) - 10} more'] if len(diff) > 10 else [])
        message = (f'the checkpoint was written under another config:\n'
                   f'  checkpoint config hash: {saved}\n'
                   f'  current config hash:    {digest}\n'
                   f'  differing top-level keys: {", ".join(top)}\n  '
                   + '\n  '.join(shown))
        if runner.cfg.get('allow_config_mismatch', False):
            runner.logger.warning(f'ConfigHashHook: {message}\nresuming anyway '
                                  f'(allow_config_mismatch=True)')
            return
        raise RuntimeError(f'ConfigHashHook: {message}\nResuming would continue that run under '
                           f'this config. Restore the config, or resume anyway with '
                           f'--cfg-options allow_config_mismatch=True')
