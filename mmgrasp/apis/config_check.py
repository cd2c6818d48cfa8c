"""Refuse config options that would change nothing, before the Runner logs the config.

mmengine ignores a top-level key nothing reads (``load_from_partail=True`` trains from scratch
without a word) and reports a misspelt option of a registered class as a bare TypeError after
printing the whole config. :func:`check_config` names such keys with their dotted path and the
closest accepted names, and refuses an evaluator whose camera is not its dataset's (the table
would be labelled with one camera and computed on the other's frames).
"""
import difflib
import inspect
from typing import Dict, Iterable, List, Optional, Set

from mmengine.config import Config
from mmengine.runner import Runner

# Top-level keys something reads: the Runner's arguments, what mmengine's Runner reads from its
# cfg besides, and mmgrasp's own (tools/train.py, ConfigHashHook).
RUNNER_KEYS = frozenset(p for p in inspect.signature(Runner.__init__).parameters
                        if p not in ('self', 'cfg'))
CONSUMED_KEYS = RUNNER_KEYS | {
    'model_wrapper_cfg', 'find_unused_parameters', 'compile', 'activation_checkpointing',
    'efficient_conv_bn_eval', 'runner_type', 'custom_imports',
    'load_from_partial', 'allow_config_mismatch'}
# Keys of a typed dict that its builder consumes, not the class.
BUILDER_KEYS = frozenset({'type', '_scope_', 'priority', 'convert_to_iter_based', 'constructor',
                          'paramwise_cfg'})


def _registries() -> list:
    from mmgrasp import registry
    return [getattr(registry, name) for name in dir(registry)
            if name.isupper() and hasattr(getattr(registry, name), 'get')]


def _parameters(obj) -> Optional[Dict[str, inspect.Parameter]]:
    """The keyword parameters ``obj`` (a class or a function) takes, by name; None when it
    takes any (``**kwargs`` reaching a base that takes any, or a signature that cannot be
    read)."""
    found: Dict[str, inspect.Parameter] = {}
    owners = [c for c in obj.__mro__ if '__init__' in c.__dict__] if inspect.isclass(obj) \
        else [obj]
    for owner in owners:
        if owner is object:
            return None
        try:
            params = inspect.signature(owner.__init__ if inspect.isclass(owner) else owner
                                       ).parameters.values()
        except (TypeError, ValueError):
            return None
        for p in params:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != 'self':
                found.setdefault(p.name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return found
    return None


def _takes_a_number(param: inspect.Parameter) -> bool:
    """The parameter's default or annotation is a number (int or float, not bool)."""
    default, note = param.default, param.annotation
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return True
    return note in (int, float, 'int', 'float')


def _registered_here_or_above(reg, name: str) -> bool:
    while reg is not None:
        reg.import_from_location()  # what ``get`` would import first (once a registry)
        if name in reg.module_dict:
            return True
        reg = reg.parent
    return False


def _lookup(type_name: str) -> list:
    found = []
    for reg in _registries():
        # A plain name that neither the registry nor its parents hold would make ``get`` try it
        # as a module path: a failed import that scans sys.path, some 0.3 ms, for every
        # registry and typed dict (most of a tool's config check). Dotted names still go there.
        if '.' not in type_name and not _registered_here_or_above(reg, type_name):
            continue
        try:
            obj = reg.get(type_name)
        except Exception:  # a scope that is not installed: its builder reports it
            obj = None
        if obj is not None and obj not in found:
            found.append(obj)
    return found


def _typed_dicts(node, path: str) -> Iterable[tuple]:
    if isinstance(node, dict):
        if isinstance(node.get('type'), str):
            yield path, node
        for key, value in node.items():
            yield from _typed_dicts(value, f'{path}.{key}' if path else str(key))
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _typed_dicts(value, f'{path}.{i}')


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(set(choices)), n=3, cutoff=0.6)
    return f'; did you mean {" or ".join(repr(c) for c in close)}?' if close else ''


def _leaf_paths(node, path: str = '') -> Dict[str, str]:
    """Last name -> dotted path of every key under ``node`` (first one wins)."""
    out: Dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            here = f'{path}.{key}' if path else str(key)
            out.setdefault(str(key), here)
            for leaf, where in _leaf_paths(value, here).items():
                out.setdefault(leaf, where)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            for leaf, where in _leaf_paths(value, f'{path}.{i}').items():
                out.setdefault(leaf, where)
    return out


def _uses_of(node, value, path: str = '') -> List[str]:
    """Dotted paths whose value equals ``value`` (where a config variable was substituted)."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _uses_of(v, value, f'{path}.{k}' if path
                                                                   else str(k))]
    if isinstance(node, (list, tuple)) and not isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(node) for p in _uses_of(v, value, f'{path}.{i}')]
    return [path] if path and type(node) is type(value) and node == value else []


def check_top_level(cfg: Config, config_path: str, file_cfg: dict, cli_keys: Set[str]) -> None:
    """Refuse a top-level key nothing reads: set on the command line, or in the file (its
    keys and values before ``--cfg-options``: ``file_cfg``) and close to a key that is read (a
    misspelling)."""
    data, file_keys = cfg.to_dict(), set(file_cfg)
    for key in sorted(cli_keys - CONSUMED_KEYS):
        if key in file_keys:
            uses = [p for p in _uses_of(file_cfg, file_cfg[key]) if p != key][:4]
            raise SystemExit(
                f'--cfg-options {key}=...: {key!r} is a variable of {config_path}, already '
                f'substituted where the file uses it when it was read, so setting it here '
                f'changes nothing' + (f'; set {", ".join(uses)} instead' if uses else ''))
        leaves = {leaf: where for leaf, where in _leaf_paths(data).items() if '.' in where}
        close = difflib.get_close_matches(key, sorted(CONSUMED_KEYS | set(leaves)), n=3,
                                          cutoff=0.75)
        hint = [leaves.get(c, c) if c not in CONSUMED_KEYS else c for c in close]
        raise SystemExit(f'--cfg-options {key}=...: no part of mmgrasp or mmengine reads a '
                         f'top-level {key!r}' + (f'; did you mean {" or ".join(map(repr, hint))}?'
                                                 if hint else ''))
    for key in sorted(file_keys - CONSUMED_KEYS - cli_keys):
        close = difflib.get_close_matches(key, sorted(CONSUMED_KEYS), n=1, cutoff=0.85)
        if close:
            raise SystemExit(f'{config_path}: top-level {key!r} is read by nothing; did you '
                             f'mean {close[0]!r}?')


def check_typed_dicts(cfg: Config, config_path: str) -> None:
    """Refuse an option a registered class does not take, naming its dotted key, the class and
    the names it accepts, and a string given where the class takes a number (instead of a
    TypeError once the Runner has printed the config, or a comparison of a string with a
    number deep inside a forward pass)."""
    for path, node in _typed_dicts(cfg.to_dict(), ''):
        candidates = _lookup(node['type'])
        if not candidates:
            continue  # the builder names an unknown type itself
        accepted = [_parameters(c) for c in candidates]
        if any(a is None for a in accepted):
            continue
        allowed = set().union(*accepted)
        unknown = [k for k in node if k not in BUILDER_KEYS and k not in allowed]
        cls = candidates[0]
        if unknown:
            key = unknown[0]
            raise SystemExit(
                f'{config_path}: {path}.{key}: {node["type"]} ({cls.__module__}) takes no '
                f'option {key!r}{_did_you_mean(key, allowed)} It takes: '
                f'{", ".join(sorted(allowed))}')
        for key, value in node.items():
            numeric = [a[key] for a in accepted if key in a and _takes_a_number(a[key])]
            if isinstance(value, str) and numeric and len(numeric) == len(candidates):
                default = numeric[0].default
                raise SystemExit(
                    f'{config_path}: {path}.{key}={value!r}: {node["type"]} ({cls.__module__}) '
                    f'takes a number for {key!r}' + (
                        f' (default {default!r})' if default is not inspect.Parameter.empty
                        else '') + ', got a string: write it without quotes')


def _camera(name):
    from mmgrasp.datasets.graspclutter6d_reader import camera_name
    try:
        return camera_name(name)  # GraspClutter6D's aliases: realsense -> realsense-d435
    except ValueError:
        return name


def check_cameras(cfg: Config, config_path: str) -> None:
    """An evaluator's ``camera`` set to another camera than its dataset's is refused: the
    dataset decides which frames are predicted, the evaluator which annotations they are scored
    against and how the table is labelled."""
    for stage in ('val', 'test'):
        evaluator, loader = cfg.get(f'{stage}_evaluator'), cfg.get(f'{stage}_dataloader')
        if not isinstance(evaluator, dict) or not isinstance(loader, dict) or \
                'camera' not in evaluator or not isinstance(loader.get('dataset'), dict):
            continue
        dataset_camera = loader['dataset'].get('camera', 'realsense')
        if _camera(evaluator['camera']) != _camera(dataset_camera):
            raise SystemExit(
                f'{config_path}: {stage}_evaluator.camera={evaluator["camera"]!r} but '
                f'{stage}_dataloader.dataset.camera={dataset_camera!r}: the frames predicted are '
                f'the dataset\'s, so set both (--cfg-options {stage}_dataloader.dataset.camera='
                f'{evaluator["camera"]} {stage}_evaluator.camera={evaluator["camera"]})')


def _gripper_users(node, path: str, inside_user: bool = False) -> Iterable[tuple]:
    """(dotted path, gripper setting) of each typed dict whose class takes ``gripper``, except
    those inside another such dict that leave it unset (the outer one passes its own down)."""
    if isinstance(node, dict):
        takes = False
        if isinstance(node.get('type'), str):
            accepted = [_parameters(c) for c in _lookup(node['type'])]
            takes = any(a is not None and 'gripper' in a for a in accepted)
            if takes and (not inside_user or node.get('gripper') is not None):
                yield path, node.get('gripper')
        for key, value in node.items():
            yield from _gripper_users(value, f'{path}.{key}' if path else str(key),
                                      inside_user or takes)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _gripper_users(value, f'{path}.{i}', inside_user)


def check_grippers(cfg: Config, config_path: str) -> None:
    """Refuse a config whose parts use different grippers (labels, model, evaluator): one
    unset is GraspNet's. The message names both parts and both grippers."""
    from mmgrasp.geometry.gripper import build_gripper
    first = None
    consumed = {k: v for k, v in cfg.to_dict().items() if k in CONSUMED_KEYS}  # not variables
    for path, setting in _gripper_users(consumed, ''):
        try:
            gripper = build_gripper(setting)
        except (TypeError, ValueError) as err:
            raise SystemExit(f'{config_path}: {path}.gripper: {err}') from None
        where = f'{path}.gripper' if setting is not None else f'{path} (gripper not set)'
        if first is None:
            first = (where, gripper)
        elif not gripper.same_as(first[1]):
            raise SystemExit(
                f'{config_path}: two grippers in one config: {first[0]} is {first[1].describe()}'
                f' but {where} is {gripper.describe()}; labels, model and evaluator must share '
                f'one gripper: set the same gripper in both (e.g. a variable `gripper = dict(...)`'
                f' used in model, SampleGraspLabels and the evaluator)')


def check_config(cfg: Config, config_path: str, file_cfg: dict, cli_keys: Set[str]) -> None:
    """All of the above: top-level keys, options of registered classes, cameras, grippers."""
    check_top_level(cfg, config_path, file_cfg, cli_keys)
    check_typed_dicts(cfg, config_path)
    check_cameras(cfg, config_path)
    check_grippers(cfg, config_path)
