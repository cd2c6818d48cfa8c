"""Train a grasp detector: ``python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]]``.

Distributed: ``tools/dist_train.sh CONFIG GPUS`` (torchrun, ``--launcher pytorch``). On a
CPU-only machine the processes talk over gloo (see :func:`mmgrasp.utils.init_cpu_distributed`).

Checkpoints are loaded strictly (:class:`CheckpointLoadHook`): a resumed checkpoint or the
config's ``load_from`` must fit the model key for key and shape for shape. Fine-tuning from a
checkpoint that fits in part needs ``load_from_partial=True`` in the config (or
``--cfg-options load_from_partial=True``); the keys that were not loaded are then logged.
"""
import argparse
import logging
from typing import Optional, Sequence

from mmengine.config import Config, DictAction
from mmengine.device import get_device
from mmengine.logging import print_log
from mmengine.runner import Runner

from mmgrasp.engine.hooks import CheckpointLoadHook
from mmgrasp.registry import RUNNERS
from mmgrasp.apis import (SETTING_ERRORS, add_launcher_args, apply_cli_options, apply_launcher,
                          check_data_roots, config_num_threads, init_cpu_distributed,
                          leave_distributed, pinned_threads, register_all_modules)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a grasp detector')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision: float16 with a dynamic loss scale on '
                        'a GPU (AmpOptimWrapper), bfloat16 on the CPU (CPUAmpOptimWrapper)')
    parser.add_argument(
        '--resume', nargs='?', type=str, const='auto',
        help='resume from this checkpoint; without a path, from the latest checkpoint of the '
        'work dir')
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction,
        help='override config settings, key=value (e.g. allow_config_mismatch=True to resume '
        'under a changed config; list items by index: a.0.b=c)')
    add_launcher_args(parser)
    return parser.parse_args(argv)


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply the command line to the config (CLI > config file > defaults)."""
    apply_cli_options(cfg, args.config, args.cfg_options, args.work_dir)
    apply_launcher(cfg, args)

    if args.amp:
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper in ('AmpOptimWrapper', 'CPUAmpOptimWrapper'):
            print_log('AMP training is already enabled in your config.', logger='current',
                      level=logging.WARNING)
        else:
            assert wrapper == 'OptimWrapper', (
                f'--amp needs the optimizer wrapper type OptimWrapper, got {wrapper}')
            if get_device() == 'cpu':  # AmpOptimWrapper needs an accelerator
                cfg.optim_wrapper.type = 'CPUAmpOptimWrapper'
                cfg.optim_wrapper.dtype = 'bfloat16'
            else:
                cfg.optim_wrapper.type = 'AmpOptimWrapper'
                cfg.optim_wrapper.loss_scale = 'dynamic'

    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def checkpoint_load_hook(cfg: Config) -> CheckpointLoadHook:
    """The check of what this run loads: strict when resuming (the run continues as it was),
    partial for ``load_from`` only when the config sets ``load_from_partial=True``."""
    if cfg.resume:
        source = cfg.load_from or f'the latest checkpoint of {cfg.work_dir}'
        return CheckpointLoadHook(f'resume from {source}', partial=False)
    return CheckpointLoadHook(f'load_from {cfg.load_from}',
                              partial=bool(cfg.get('load_from_partial', False)))


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    # mmgrasp's modules and its torch.load allow-list; the Runner sets the default scope
    register_all_modules(False)
    cfg = merge_args(Config.fromfile(args.config), args)
    check_data_roots(cfg, args.config, ('train_dataloader', ) + (
        ('val_dataloader', 'val_evaluator') if cfg.get('val_cfg') else ()))
    init_cpu_distributed(args.launcher)

    # the config's torch thread count (env_cfg.num_threads), from the model's first draws on
    with pinned_threads(config_num_threads(cfg, args.config)):
        try:
            runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
            runner.register_hook(checkpoint_load_hook(cfg))
            runner.train()
        except SETTING_ERRORS as err:
            raise SystemExit(f'error: {err}') from None
    leave_distributed()


if __name__ == '__main__':
    main()
