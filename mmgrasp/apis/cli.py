"""What every tool does with its command line before building a Runner."""
import argparse
import os
import os.path as osp
import subprocess
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import torch
import torch.distributed as dist
from mmengine.config import Config

from mmgrasp.engine.hooks import ScaleStatisticError
from mmgrasp.geometry.gripper import GripperMismatchError
from mmgrasp.storage.secrets import secret_paths
from mmgrasp.utils.checkpoint_keys import CheckpointMismatchError
from .config_check import check_config

LAUNCHERS = ('none', 'pytorch', 'slurm')

#: Refusals of a run's settings found while the Runner builds or runs (a checkpoint that is not
#: the model's, labels made for another gripper, a width statistic with empty bins): the tools
#: print them as one line.
SETTING_ERRORS = (CheckpointMismatchError, GripperMismatchError, ScaleStatisticError)


def apply_cli_options(cfg: Config, config_path: str, cfg_options: Optional[dict],
                      work_dir: Optional[str]) -> Config:
    """Merge ``--cfg-options`` into ``cfg`` and settle its work dir: the command line, then the
    config file, then ``./work_dirs/<config stem>``. A config holding a secret-looking option is
    refused before anything logs it, and so is an option that would change nothing (a key
    nothing reads, an option a class does not take, an evaluator camera that is not the
    dataset's: :mod:`.config_check`), and so is a thread count that is not one
    (:func:`config_num_threads`; the tools run under :func:`pinned_threads`)."""
    file_cfg = cfg.to_dict()
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])
    secrets = secret_paths(cfg.to_dict())
    if secrets:  # mmengine's Runner logs the whole config before any hook could redact it
        raise SystemExit(f'{config_path}: {", ".join(secrets)} look like credentials; a config is '
                         'logged, dumped into the work dir and stored in every checkpoint, so '
                         'credentials come from the environment or the storage library\'s own '
                         'configuration (see mmgrasp.storage.secrets)')
    check_config(cfg, config_path, file_cfg, {k.split('.')[0] for k in cfg_options or {}})
    config_num_threads(cfg, config_path)  # refused now, applied by the tools' pinned_threads
    return cfg


#: What writes the demo configs' data root (``data_root = 'data/synthetic'``): the Quick start's
#: dataset and its graspness, as tools/run_demo.sh writes them.
DEMO_DATA_COMMAND = ('python tools/data/make_synthetic.py {root} --scenes 4 --frames 4 '
                     '--objects 10 --points-per-object 300 --cameras realsense && '
                     'python tools/data/generate_graspness.py {root}')
#: the GraspClutter6D demo's (docs/user_guides/dataset_prepare.md)
GC6D_DEMO_DATA_COMMAND = ('python tools/data/make_synthetic.py {root} --layout graspclutter6d '
                          '--scenes 3 --test-scenes 1 --frames 13 --objects 6 '
                          '--points-per-object 300 && python tools/data/generate_graspness.py '
                          '{root} --camera realsense-d435')


def check_data_roots(cfg: Config, config_path: str, keys: Sequence[str]) -> None:
    """SystemExit in one line when the data root of a dataloader (or evaluator) in ``keys`` is
    not a folder: its path, the key, and what writes it (the demo dataset's command for a
    synthetic root) — before the Runner builds a dataset and fails in a traceback."""
    for key in keys:
        section = cfg.get(key) or {}
        dataset = section.get('dataset', section)
        for i, part in enumerate(dataset.get('datasets') or [dataset]):
            root = part.get('data_root')
            if not isinstance(root, str) or osp.isdir(root):
                continue
            where = (f'{key}.dataset.datasets.{i}.data_root' if dataset.get('datasets') else
                     f'{key}.dataset.data_root' if 'dataset' in section else f'{key}.data_root')
            name = osp.basename(osp.normpath(root))
            command = GC6D_DEMO_DATA_COMMAND if 'gc6d' in name else DEMO_DATA_COMMAND
            fix = (f'write the demo dataset with `{command.format(root=root)}`'
                   if 'synthetic' in name else
                   'put the dataset there (docs/user_guides/dataset_prepare.md)')
            raise SystemExit(f'{config_path}: data root {root} ({where}) does not exist '
                             f'(working directory {os.getcwd()}): {fix}, or give another root '
                             f'with --cfg-options {where}=PATH')


def config_num_threads(cfg: Config, config_path: str) -> Optional[int]:
    """The config's ``env_cfg.num_threads`` (None: torch's default, one per core); SystemExit
    naming the key for anything but a positive integer.

    On the CPU a result depends on the thread count: a reduction, a matrix product or a
    convolution split over another number of threads adds in another order, and the rounding
    differs; over a training it grows into another loss and AP. Pinned, a run repeats bit for
    bit with the same torch build on the same kind of CPU (its instruction set picks oneDNN's
    and MKL's kernels). Loader workers run one thread each whatever this says (PyTorch sets
    them so)."""
    threads = (cfg.get('env_cfg') or {}).get('num_threads')
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SystemExit(f'{config_path}: env_cfg.num_threads={threads!r}: expected a positive '
                         'integer (torch threads per process), or leave it out for one per core')
    return threads


@contextmanager
def pinned_threads(threads: Optional[int]) -> Iterator[None]:
    """Run the block with torch's intra-op thread count set to ``threads`` (None: unchanged),
    and restore the caller's count after it (a tool's ``main`` or the inferencer may run inside
    another program, a test session among them)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def add_launcher_args(parser: argparse.ArgumentParser) -> None:
    """``--launcher {none,pytorch,slurm}`` and the ``--local-rank`` that
    ``torch.distributed.launch`` passes (torchrun sets ``LOCAL_RANK`` itself); call
    :func:`apply_launcher` with the parsed arguments."""
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none', help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def apply_launcher(cfg: Config, args: argparse.Namespace) -> Config:
    """Set ``cfg.launcher`` (and ``LOCAL_RANK`` when no launcher set it). Without CUDA,
    mmengine's DDP defaults (``device_ids=[LOCAL_RANK]``, nccl) cannot work: the model wrapper
    gets ``device_ids=None`` and the process group gloo. Configs stay device-agnostic; the
    machine decides here."""
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    cfg.launcher = args.launcher
    if args.launcher != 'none' and not torch.cuda.is_available():
        wrapper_cfg = dict(type='MMDistributedDataParallel',
                           find_unused_parameters=cfg.get('find_unused_parameters', False))
        wrapper_cfg.update(cfg.get('model_wrapper_cfg') or {})
        wrapper_cfg.update(device_ids=None, broadcast_buffers=False)
        cfg.model_wrapper_cfg = wrapper_cfg
        cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})['backend'] = 'gloo'
    return cfg


def init_cpu_distributed(launcher: str) -> None:
    """Start the gloo process group before the Runner does, on a CPU-only machine: mmengine's
    ``init_dist`` calls ``torch.cuda.set_device``, which fails on a CPU-only torch. The Runner
    then finds the group and keeps it. Slurm's variables are mapped to torch's first, as
    mmengine does. Does nothing with ``launcher='none'``, with CUDA or when a group exists."""
    if launcher == 'none' or torch.cuda.is_available() or dist.is_initialized():
        return
    if launcher == 'slurm':
        node_list = os.environ['SLURM_NODELIST']
        os.environ.setdefault('MASTER_ADDR', subprocess.getoutput(
            f'scontrol show hostname {node_list} | head -n1'))
        os.environ.setdefault('MASTER_PORT', '29500')
        os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
        os.environ['RANK'] = os.environ['SLURM_PROCID']
        os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')
    dist.init_process_group('gloo')


def leave_distributed() -> None:
    """End a distributed run together: a rank that leaves while another still writes can abort
    in gloo's teardown ('terminate called without an active exception')."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
