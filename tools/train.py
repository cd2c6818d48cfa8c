"""Train a grasp detector: ``python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]]``.

Distributed: ``tools/dist_train.sh CONFIG GPUS`` (torchrun, ``--launcher pytorch``). On a
CPU-only machine the processes talk over gloo (see :func:`setup_cpu_distributed`).
"""
import argparse
import logging
import os
import subprocess
from typing import Optional, Sequence

import torch
import torch.distributed as dist
from mmengine.config import Config, DictAction
from mmengine.device import get_device
from mmengine.logging import print_log
from mmengine.runner import Runner

from mmgrasp.registry import RUNNERS
from mmgrasp.utils import apply_cli_options, register_all_modules


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
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK itself
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply the command line to the config (CLI > config file > defaults)."""
    cfg.launcher = args.launcher
    apply_cli_options(cfg, args.config, args.cfg_options, args.work_dir)

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

    if args.launcher != 'none' and not torch.cuda.is_available():
        # mmengine's DDP defaults (device_ids=[LOCAL_RANK], nccl) need CUDA; configs stay
        # device-agnostic, the machine decides here.
        wrapper_cfg = dict(type='MMDistributedDataParallel',
                           find_unused_parameters=cfg.get('find_unused_parameters', False))
        wrapper_cfg.update(cfg.get('model_wrapper_cfg') or {})
        wrapper_cfg.update(device_ids=None, broadcast_buffers=False)
        cfg.model_wrapper_cfg = wrapper_cfg
        cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})['backend'] = 'gloo'
    return cfg


def setup_cpu_distributed(launcher: str) -> None:
    """Start the gloo process group before the Runner does: mmengine's ``init_dist`` calls
    ``torch.cuda.set_device``, which fails on a CPU-only torch. The Runner then finds the
    group and keeps it. Slurm's variables are mapped to torch's first, as mmengine does."""
    if launcher == 'slurm':
        node_list = os.environ['SLURM_NODELIST']
        os.environ.setdefault('MASTER_ADDR', subprocess.getoutput(
            f'scontrol show hostname {node_list} | head -n1'))
        os.environ.setdefault('MASTER_PORT', '29500')
        os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
        os.environ['RANK'] = os.environ['SLURM_PROCID']
        os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')
    dist.init_process_group('gloo')


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    # mmgrasp's modules and its torch.load allow-list; the Runner sets the default scope
    register_all_modules(False)
    cfg = merge_args(Config.fromfile(args.config), args)
    if args.launcher != 'none' and not torch.cuda.is_available() and not dist.is_initialized():
        setup_cpu_distributed(args.launcher)

    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    runner.train()
    if dist.is_initialized():
        # A rank that leaves while another still saves a checkpoint can abort in gloo's
        # teardown ('terminate called without an active exception'): leave together.
        dist.barrier()
        dist.destroy_process_group()


if __name__ == '__main__':
    main()
